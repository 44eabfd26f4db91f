/**
 * Cross-origin use of the API from browsers (--cors-origins): off unless origins are named.
 * A request from a named origin gets Access-Control-Allow-Origin for that origin (never
 * `*`), the headers Connect, gRPC-Web and SSE need, and a preflight answer; any other
 * origin gets no CORS header at all (the browser then refuses the response) and its
 * preflight 403. Must never: allow an origin that is not named, or allow credentials
 * (cookies): the API's only credential is the bearer token the page sends itself.
 */
import type http from "node:http";
import { cors } from "@connectrpc/connect";

const ALLOW_HEADERS = [...cors.allowedHeaders, "Authorization", "Last-Event-ID"].join(", ");
const EXPOSE_HEADERS = cors.exposedHeaders.join(", ");
const ALLOW_METHODS = [...cors.allowedMethods, "OPTIONS"].join(", ");

/** An origin as --cors-origins takes it (scheme://host[:port], nothing else), or why not. */
export function parseOrigin(text: string): { origin: string } | { error: string } {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return { error: `${JSON.stringify(text)} is not an origin like https://console.example.com` };
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    return { error: `${JSON.stringify(text)}: only http and https origins` };
  if (u.origin !== text.replace(/\/$/, ""))
    return { error: `${JSON.stringify(text)}: an origin has no path, query or user (${u.origin})` };
  return { origin: u.origin };
}

/**
 * Adds the CORS headers a request from an allowed origin needs; answers a preflight.
 * Returns true when the request was answered here (a preflight).
 */
export function applyCors(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  allowed: ReadonlySet<string>,
): boolean {
  const origin = req.headers.origin;
  const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"];
  if (origin === undefined || allowed.size === 0) {
    if (!preflight) return false;
    res.writeHead(403, { "content-type": "text/plain" }).end("cross-origin use is off\n");
    return true;
  }
  res.setHeader("vary", "Origin");
  if (!allowed.has(origin)) {
    if (!preflight) return false;
    res
      .writeHead(403, { "content-type": "text/plain" })
      .end(`origin ${origin} is not in --cors-origins\n`);
    return true;
  }
  res.setHeader("access-control-allow-origin", origin);
  res.setHeader("access-control-expose-headers", EXPOSE_HEADERS);
  if (!preflight) return false;
  res
    .writeHead(204, {
      "access-control-allow-methods": ALLOW_METHODS,
      "access-control-allow-headers": ALLOW_HEADERS,
      "access-control-max-age": "600",
    })
    .end();
  return true;
}
