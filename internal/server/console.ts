/**
 * The web console at /ui/ (issue #18): the files `make build` put in internal/console/dist
 * (index.html and content-hashed assets), served on the API's own port so the page calls
 * the API on the same origin. Strict headers: a content security policy that loads
 * nothing from anywhere but agentd, no framing, no referrer, no sniffing. Must never:
 * serve a file outside the build directory, or anything that carries a token.
 */
import { createReadStream, existsSync, statSync } from "node:fs";
import type http from "node:http";
import { extname, join } from "node:path";

export const CONSOLE_PATH = "/ui/";
/** Where `make build` writes the console (scripts/build-console.ts). */
export const CONSOLE_DIST = new URL("../console/dist/", import.meta.url).pathname;

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".map": "application/json",
};

const SECURITY = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** Answers GET/HEAD under /ui; false for any other path. */
export function serveConsole(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  dir: string = CONSOLE_DIST,
): boolean {
  if (path === "/ui") {
    res.writeHead(301, { location: CONSOLE_PATH }).end();
    return true;
  }
  if (!path.startsWith(CONSOLE_PATH)) return false;
  const rest = path.slice(CONSOLE_PATH.length);
  // index.html for the page itself; assets by their exact (hashed) name, nothing else.
  const m = /^assets\/([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.(?:js|css|svg|map))$/.exec(rest);
  if (rest !== "" && rest !== "index.html" && m === null) {
    res.writeHead(404, { "content-type": "text/plain", ...SECURITY }).end("not found\n");
    return true;
  }
  const file = m === null ? join(dir, "index.html") : join(dir, "assets", m[1] as string);
  if (!existsSync(file) || !statSync(file).isFile()) {
    const built = existsSync(join(dir, "index.html"));
    res
      .writeHead(built ? 404 : 503, { "content-type": "text/plain", ...SECURITY })
      .end(built ? "not found\n" : "the console is not built: run `make build`\n");
    return true;
  }
  // The build's gzipped copy, to a browser that takes gzip.
  const gz =
    /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? "")) && existsSync(`${file}.gz`);
  const body = gz ? `${file}.gz` : file;
  res.writeHead(200, {
    "content-type": TYPES[extname(file)] ?? "application/octet-stream",
    "content-length": statSync(body).size,
    vary: "Accept-Encoding",
    ...(gz ? { "content-encoding": "gzip" } : {}),
    // Assets are named by their content: kept; the page is asked for again each time.
    "cache-control": m === null ? "no-cache" : "public, max-age=31536000, immutable",
    ...SECURITY,
  });
  if (req.method === "HEAD") res.end();
  else createReadStream(body).pipe(res);
  return true;
}
