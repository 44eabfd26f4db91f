/**
 * Security review of credential interception (issue #16), on loopback only: the proxy
 * wired to intercept() as run-egress.ts wires it, an HTTPS upstream "api.test" that, like
 * GitHub's POST /markdown/raw, renders a request body back without authentication. The
 * sandbox trusts the run's CA (as its bundle does) and never sees the credential — unless
 * it can make the proxy's own credentialed request part of a request it wrote itself.
 * A failing assertion is a finding.
 */
import assert from "node:assert/strict";
import https from "node:https";
import net from "node:net";
import { after, before, it } from "node:test";
import tls from "node:tls";
import { type HostRule, parseHostRule } from "./destination.ts";
import { intercept } from "./intercept.ts";
import { createEgressProxy, type EgressProxy } from "./proxy.ts";
import { createRunCa, type RunCa } from "./run-ca.ts";

const SECRET = "ghp_Zq8v2LmN4xR7tY1wK9sD3fH6jB0cE5aG";
let runCa: RunCa;
let upstreamCa: RunCa;
let upPort: number;
let proxy: EgressProxy;
let proxyPort: number;
const upstreamSaw: string[] = [];
const rawUpstream: string[] = [];
const servers: net.Server[] = [];

before(async () => {
  runCa = await createRunCa({ runId: "run-attack" });
  upstreamCa = await createRunCa({ runId: "upstream-roots" });
  const leaf = await upstreamCa.leafFor("api.test");
  const up = https.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
    let body = "";
    req.on("data", (b: Buffer) => (body += b.toString("latin1")));
    req.on("end", () => {
      upstreamSaw.push(`${req.method} ${req.url} auth=${req.headers.authorization ?? "-"}`);
      if (req.method === "POST" && req.url === "/markdown") return res.end(`<p>${body}</p>`);
      if (req.url === "/big") return res.end(Buffer.alloc(256 * 1024, 0x61));
      if (req.url === "/user")
        return res.writeHead(req.headers.authorization === `Bearer ${SECRET}` ? 200 : 401).end();
      res.end("ok");
    });
  });
  // Like nginx: pipelined requests are answered in order; bytes that do not parse get a 400
  // after the answers before them (Node's default would drop those answers).
  up.on("clientError", (_err, socket) =>
    setTimeout(() => socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n"), 200),
  );
  up.on("secureConnection", (s: tls.TLSSocket) =>
    s.on("data", (b: Buffer) => rawUpstream.push(b.toString("latin1"))),
  );
  servers.push(up);
  await new Promise<void>((r) => up.listen(0, "127.0.0.1", r));
  upPort = (up.address() as net.AddressInfo).port;
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  proxy = createEgressProxy({
    check: { rules: [parseHostRule("api.test") as HostRule], privateAllowed },
    resolve: async () => ["127.0.0.1"],
    intercept: (host, port) => (client, first, address, budget) =>
      intercept(client, first, {
        host,
        port,
        address,
        spend: budget.spend,
        admitRequest: budget.count,
        ca: runCa,
        headers: { Authorization: `Bearer ${SECRET}` },
        upstreamCa: upstreamCa.certPem,
        maxBytes: 1024 ** 2,
        idleTimeoutMs: 5000,
        connectTimeoutMs: 5000,
      }),
  });
  proxyPort = (await proxy.listen("127.0.0.1", 0)).port;
});

after(async () => {
  await proxy?.close();
  for (const s of servers) s.close();
});

/** A TLS connection to api.test through the proxy, as the sandbox opens one. */
async function tunnel(): Promise<tls.TLSSocket> {
  const s = net.connect(proxyPort, "127.0.0.1");
  await new Promise((r) => s.once("connect", r));
  s.write(`CONNECT api.test:${upPort} HTTP/1.1\r\n\r\n`);
  await new Promise<void>((r) => s.once("data", () => r()));
  const t = tls.connect({ socket: s, servername: "api.test", ca: runCa.certPem });
  await new Promise((r, j) => t.once("secureConnect", r).once("error", j));
  return t;
}

/** Everything the connection sends within `ms`. */
function readFor(t: tls.TLSSocket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const on = (b: Buffer) => (got += b.toString("latin1"));
    t.on("data", on);
    setTimeout(() => {
      t.off("data", on);
      resolve(got);
    }, ms);
  });
}

/** The answer that comes back for our second request after `smuggled` rode in the first one's body. */
async function smuggle(smuggled: string): Promise<string> {
  const t = await tunnel();
  t.write(
    `GET /x HTTP/1.1\r\nhost: api.test\r\nconnection: keep-alive, content-length\r\ncontent-length: ${smuggled.length}\r\n\r\n${smuggled}`,
  );
  await readFor(t, 300);
  t.write("GET /y HTTP/1.1\r\nhost: api.test\r\n\r\n");
  const second = await readFor(t, 700);
  t.destroy();
  return second;
}

/** A request for the echo endpoint whose body will be the first `n` bytes of the proxy's next request. */
const echoOf = (n: number) =>
  `POST /markdown HTTP/1.1\r\nhost: api.test\r\ncontent-type: text/plain\r\ncontent-length: ${n}\r\n\r\n`;

it("a request cannot drop its own framing (Connection: content-length) and smuggle a request that swallows the next, credentialed one", async () => {
  // What the proxy sends upstream for "GET /y" starts with this; the credential follows.
  const prefix = "GET /y HTTP/1.1\r\nhost: api.test\r\nauthorization: Bearer ";
  // 1. The credential's length: an echo that holds all of it comes back masked.
  let lo = 1;
  let hi = 128;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const r = await smuggle(echoOf(prefix.length + mid));
    if (r.includes("[REDACTED]") || !r.includes("<p>")) hi = mid;
    else lo = mid + 1;
  }
  const length = lo;
  // 2. All of it but the last character: a partial value is not masked.
  const echo = await smuggle(echoOf(prefix.length + length - 1));
  const head = /Bearer (\S+)<\/p>/.exec(echo)?.[1] ?? "";
  console.log(`length ${length}; echoed: ${JSON.stringify(echo.split("\r\n\r\n")[1])}`);
  // 3. The last character: a smuggled request carries our own guess (nothing replaces it).
  let found = "";
  for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") {
    const r = await smuggle(
      `GET /user HTTP/1.1\r\nhost: api.test\r\nauthorization: Bearer ${head}${c}\r\ncontent-length: ${prefix.length}\r\n\r\n`,
    );
    if (/^HTTP\/1\.1 200/.test(r)) {
      found = head + c;
      break;
    }
  }
  console.log(
    `recovered by the sandbox: ${JSON.stringify(found)}; upstream saw ${upstreamSaw.filter((l) => l.includes("auth=-") || !l.includes(SECRET)).length} requests the sandbox wrote itself`,
  );
  assert.notEqual(found, SECRET, "the sandbox recovered the whole credential");
  assert.ok(
    !head.length,
    `the sandbox read ${head.length} of ${SECRET.length} characters of the credential`,
  );
});

it("intercepted connections count against the run's byte budget (limits.bytes)", async () => {
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  const p = createEgressProxy({
    check: { rules: [parseHostRule("api.test") as HostRule], privateAllowed },
    resolve: async () => ["127.0.0.1"],
    maxTotalBytes: 64 * 1024, // the drive's whole budget: 64 KiB
    intercept: (host, port) => (client, first, address, budget) =>
      intercept(client, first, {
        host,
        port,
        address,
        spend: budget.spend,
        admitRequest: budget.count,
        ca: runCa,
        headers: { Authorization: `Bearer ${SECRET}` },
        upstreamCa: upstreamCa.certPem,
        maxBytes: 1024 ** 2,
        idleTimeoutMs: 5000,
        connectTimeoutMs: 5000,
      }),
  });
  const port = (await p.listen("127.0.0.1", 0)).port;
  let got = 0;
  const refused: string[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const s = net.connect(port, "127.0.0.1");
      await new Promise((r) => s.once("connect", r));
      s.write(`CONNECT api.test:${upPort} HTTP/1.1\r\n\r\n`);
      const answer = await new Promise<string>((r) => s.once("data", (b: Buffer) => r(String(b))));
      if (!answer.startsWith("HTTP/1.1 200")) {
        refused.push(answer.split("\r\n")[0] ?? "");
        s.destroy();
        continue;
      }
      const t = tls.connect({ socket: s, servername: "api.test", ca: runCa.certPem });
      t.on("error", () => undefined);
      const up = await new Promise<boolean>((r) => {
        t.once("secureConnect", () => r(true));
        t.once("close", () => r(false));
      });
      if (!up) continue;
      t.write("GET /big HTTP/1.1\r\nhost: api.test\r\nconnection: close\r\n\r\n");
      try {
        for await (const c of t) got += (c as Buffer).length;
      } catch {
        // cut at the budget
      }
    }
  } finally {
    await p.close();
  }
  console.log(`downloaded ${got} bytes through intercepted tunnels with a 65536-byte budget`);
  assert.ok(got <= 64 * 1024 + 16 * 1024, `${got} bytes went through past limits.bytes`);
  assert.ok(
    refused.some((r) => / 403 /.test(r)),
    `later tunnels refused: ${refused.join("; ")}`,
  );
});
