/**
 * The console's files at /ui/ and cross-origin use (--cors-origins), through the real app
 * on an HTTP server on port 0, with a console build of the test's own in a temp directory.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { serveConsole } from "./console.ts";
import { applyCors, parseOrigin } from "./cors.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-console-"));
let server: http.Server;
let base = "";

before(async () => {
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>agentd</title>");
  writeFileSync(join(dir, "assets", "app-1a2b3c.js"), "console.log(1)");
  writeFileSync(join(dir, "assets", "app-1a2b3c.js.gz"), gzipSync("console.log(1)"));
  writeFileSync(join(dir, "secret.txt"), "not for the web");
  const allowed = new Set(["https://console.example.com"]);
  server = http.createServer((req, res) => {
    if (applyCors(req, res, allowed)) return;
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (serveConsole(req, res, path, dir)) return;
    res.writeHead(200, { "content-type": "text/plain" }).end("api");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the console's files", () => {
  it("serves the page and hashed assets with strict headers, nothing else", async () => {
    const page = await fetch(`${base}/ui/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /text\/html/);
    assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'none'/);
    assert.equal(page.headers.get("x-frame-options"), "DENY");
    assert.equal(page.headers.get("cache-control"), "no-cache");
    const js = await fetch(`${base}/ui/assets/app-1a2b3c.js`);
    assert.equal(js.status, 200);
    assert.equal(js.headers.get("content-encoding"), "gzip"); // fetch asks for it; the build made it
    assert.equal(await js.text(), "console.log(1)");
    assert.match(js.headers.get("cache-control") ?? "", /immutable/);
    assert.equal((await fetch(`${base}/ui`, { redirect: "manual" })).status, 301);
    for (const bad of [
      "/ui/secret.txt",
      "/ui/assets/../secret.txt",
      "/ui/assets/%2e%2e%2fsecret.txt",
      "/ui/assets/nope.js",
      "/ui/assets/app.exe",
    ]) {
      const r = await fetch(`${base}${bad}`);
      assert.equal(r.status, 404, bad);
      assert.doesNotMatch(await r.text(), /not for the web/, bad);
    }
  });

  it("says the console is not built when it is not", async () => {
    const empty = mkdtempSync(join(tmpdir(), "agentd-console-empty-"));
    const res = await new Promise<{ status: number; body: string }>((resolve) => {
      const s = http.createServer((req, r) => serveConsole(req, r, "/ui/", empty));
      s.listen(0, "127.0.0.1", () => {
        const port = (s.address() as { port: number }).port;
        void fetch(`http://127.0.0.1:${port}/ui/`).then(async (r) => {
          resolve({ status: r.status, body: await r.text() });
          s.close();
        });
      });
    });
    rmSync(empty, { recursive: true, force: true });
    assert.equal(res.status, 503);
    assert.match(res.body, /make build/);
  });
});

describe("cross-origin use", () => {
  const preflight = (origin: string) =>
    fetch(`${base}/agentd.v1.RunService/ListRuns`, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });

  it("a named origin gets its preflight and its own origin back, never *", async () => {
    const p = await preflight("https://console.example.com");
    assert.equal(p.status, 204);
    assert.equal(p.headers.get("access-control-allow-origin"), "https://console.example.com");
    assert.match(p.headers.get("access-control-allow-headers") ?? "", /Authorization/);
    assert.equal(p.headers.get("access-control-allow-credentials"), null);
    const r = await fetch(`${base}/x`, { headers: { origin: "https://console.example.com" } });
    assert.equal(r.headers.get("access-control-allow-origin"), "https://console.example.com");
    assert.match(r.headers.get("access-control-expose-headers") ?? "", /Grpc-Status/i);
  });

  it("any other origin gets no CORS header, and its preflight 403", async () => {
    for (const origin of [
      "https://evil.example",
      "https://console.example.com.evil.example",
      "null",
    ]) {
      const p = await preflight(origin);
      assert.equal(p.status, 403, origin);
      assert.equal(p.headers.get("access-control-allow-origin"), null);
      const r = await fetch(`${base}/x`, { headers: { origin } });
      assert.equal(r.headers.get("access-control-allow-origin"), null, origin);
    }
  });

  it("parses origins strictly", () => {
    assert.deepEqual(parseOrigin("https://a.example:8443"), { origin: "https://a.example:8443" });
    assert.deepEqual(parseOrigin("https://a.example/"), { origin: "https://a.example" });
    for (const bad of ["https://a.example/p", "https://u@a.example", "ftp://a.example", "*"])
      assert.ok("error" in parseOrigin(bad), bad);
  });
});
