/**
 * The egress proxy on loopback, against real upstreams (HTTP and HTTPS servers on port 0):
 * names resolve through a table the test controls (127.0.0.1 is named as allowed, the
 * metadata address is not). Allowed and refused HTTP and CONNECT, a tunnel whose
 * ClientHello names another host or is not TLS, the connection limit, a hanging upstream.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import tls from "node:tls";
import { serverCerts } from "../testing/certs.ts";
import { type HostRule, parseHostRule } from "./destination.ts";
import { type ConnectionRecord, createEgressProxy, type EgressProxy } from "./proxy.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-egress-"));
const records: ConnectionRecord[] = [];
let proxy: EgressProxy;
let proxyPort: number;
let httpPort: number;
let httpsPort: number;
let hangPort: number;
let ca: Buffer;
const servers: net.Server[] = [];

const NAMES: Record<string, string[]> = {
  "up.example.com": ["127.0.0.1"],
  "meta.example.com": ["169.254.169.254"],
  "hang.example.com": ["127.0.0.1"],
};

async function listen(s: net.Server): Promise<number> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return (s.address() as net.AddressInfo).port;
}

before(async () => {
  const certs = serverCerts(join(dir, "ca"));
  ca = readFileSync(certs.ca);
  httpPort = await listen(http.createServer((req, res) => res.end(`hello ${req.headers.host}`)));
  httpsPort = await listen(
    https.createServer(
      { cert: readFileSync(certs.cert), key: readFileSync(certs.key) },
      (_req, res) => res.end("secure hello"),
    ),
  );
  hangPort = await listen(net.createServer(() => undefined)); // accepts, never answers
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  proxy = createEgressProxy({
    check: {
      rules: ["up.example.com", "meta.example.com", "hang.example.com"].map(
        (e) => parseHostRule(e) as HostRule,
      ),
      privateAllowed,
    },
    resolve: async (host) => NAMES[host] ?? [],
    maxConnections: 3,
    idleTimeoutMs: 400,
    connectTimeoutMs: 1000,
    onConnection: (r) => records.push(r),
  });
  proxyPort = (await proxy.listen("127.0.0.1", 0)).port;
});

after(async () => {
  await proxy?.close();
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

function viaProxy(url: string): Promise<{ status: number; body: string; reason: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: proxyPort, path: url, headers: { host: new URL(url).host } },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            reason: String(res.headers["x-agentd-egress"] ?? ""),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Polls `done` for up to 120 s (generous: only a close that never comes fails it). */
async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`waited 120 s for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** CONNECT host:port; the socket after a 200, or the refusal's status line. */
function connect(target: string): Promise<{ socket: net.Socket } | { status: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port: proxyPort,
      method: "CONNECT",
      path: target,
    });
    req.on("connect", (res, socket) => {
      if (res.statusCode === 200) resolve({ socket });
      else resolve({ status: `${res.statusCode} ${res.headers["x-agentd-egress"] ?? ""}` });
    });
    req.on("error", reject);
    req.end();
  });
}

it("forward HTTP: an allowed name reaches its upstream; others are refused with the reason", async () => {
  const ok = await viaProxy(`http://up.example.com:${httpPort}/x`);
  assert.deepEqual([ok.status, ok.body], [200, `hello up.example.com:${httpPort}`]);
  const no = await viaProxy(`http://evil.example.org:${httpPort}/`);
  assert.equal(no.status, 403);
  assert.match(no.reason, /not in the policy's network.allow/);
  const meta = await viaProxy("http://meta.example.com/latest/meta-data/");
  assert.equal(meta.status, 403);
  assert.match(meta.reason, /169\.254\.169\.254, a metadata address/);
  const rec = records.find((r) => r.host === "up.example.com" && r.method === "GET");
  assert.ok(rec?.allowed && rec.bytesDown > 0, JSON.stringify(rec));
});

it("CONNECT: a TLS tunnel for its own host works end to end; another server name or plain bytes are cut", async () => {
  const t = await connect(`up.example.com:${httpsPort}`);
  assert.ok("socket" in t);
  const secure = tls.connect({
    socket: t.socket,
    servername: "up.example.com",
    ca,
    checkServerIdentity: () => undefined,
  });
  await new Promise<void>((r, j) => secure.once("secureConnect", r).once("error", j));
  secure.write("GET / HTTP/1.1\r\nhost: up.example.com\r\nconnection: close\r\n\r\n");
  let answer = "";
  for await (const c of secure) answer += c.toString();
  assert.match(answer, /secure hello/);

  const lie = await connect(`up.example.com:${httpsPort}`);
  assert.ok("socket" in lie);
  const other = tls.connect({
    socket: lie.socket,
    servername: "bank.example.net",
    ca,
    checkServerIdentity: () => undefined,
  });
  await assert.rejects(
    new Promise((r, j) =>
      other
        .once("secureConnect", r)
        .once("error", j)
        .once("close", () => j(new Error("closed"))),
    ),
  );
  // Plain HTTP in a tunnel (Node's fetch tunnels http:// URLs): served for the tunnel's host
  // only; another Host is refused (421) and bytes that are neither HTTP nor TLS are cut.
  const plain = await connect(`up.example.com:${httpPort}`);
  assert.ok("socket" in plain);
  plain.socket.write(
    `GET /in-tunnel HTTP/1.1\r\nhost: up.example.com:${httpPort}\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`,
  );
  const answers = await new Promise<string>((r) => {
    let got = "";
    plain.socket.on("data", (c: Buffer) => (got += c.toString()));
    plain.socket.on("close", () => r(got));
  });
  assert.match(answers, /^HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 421 [\s\S]*for that host only/);
  const junk = await connect(`up.example.com:${httpPort}`);
  assert.ok("socket" in junk);
  junk.socket.write("\x00\x01 not a protocol\r\n\r\n");
  const closed = await new Promise<string>((r) => {
    let got = "";
    junk.socket.on("data", (c: Buffer) => (got += c.toString()));
    junk.socket.on("close", () => r(got));
  });
  assert.equal(closed, "", "nothing reached the upstream");
  await new Promise((r) => setTimeout(r, 50));
  const cut = records.filter((r) => r.method === "CONNECT" && !r.allowed).map((r) => r.reason);
  assert.ok(
    cut.some((x) => /server name bank\.example\.net is not up\.example\.com/.test(x)),
    cut.join("; "),
  );
  assert.ok(
    cut.some((x) => /not TLS for up\.example\.com/.test(x)),
    cut.join("; "),
  );
  assert.ok(records.some((r) => r.method === "GET" && r.allowed && r.tls === "plain"));
  const refused = await connect("meta.example.com:443");
  assert.ok("status" in refused && /^403 .*metadata/.test(refused.status));
});

it("a hanging upstream is cut at the idle timeout; past the connection limit, 429", async () => {
  // The upstream never answers: only the proxy's idle timeout can end the request (a 502).
  const hung = await viaProxy(`http://hang.example.com:${hangPort}/`);
  assert.equal(hung.status, 502);
  const tunnels = await Promise.all([1, 2, 3].map(() => connect(`hang.example.com:${hangPort}`)));
  assert.ok(
    tunnels.every((x) => "socket" in x),
    "three at once are allowed",
  );
  const fourth = await viaProxy(`http://up.example.com:${httpPort}/`);
  assert.equal(fourth.status, 429);
  for (const x of tunnels) if ("socket" in x) x.socket.destroy();
});

describe("a tunnel's ends and a forward request's client", () => {
  let p: EgressProxy;
  let port: number;
  let bulkPort: number;
  let bigPort: number;
  const recs: ConnectionRecord[] = [];
  const BULK = 8 * 1024 * 1024;
  before(async () => {
    const certs = serverCerts(join(dir, "ca2"));
    const tlsOpts = { cert: readFileSync(certs.cert), key: readFileSync(certs.key) };
    // Sends BULK bytes and closes at once: what was queued must still reach the client.
    bulkPort = await listen(tls.createServer(tlsOpts, (s) => s.end(Buffer.alloc(BULK, 7))));
    bigPort = await listen(
      http.createServer((_req, res) => {
        const chunk = Buffer.alloc(64 * 1024, 1);
        let sent = 0;
        const more = (): void => {
          while (sent < 200 * 1024 * 1024) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", more);
          }
          res.end();
        };
        more();
      }),
    );
    const privateAllowed = new net.BlockList();
    privateAllowed.addAddress("127.0.0.1");
    p = createEgressProxy({
      check: { rules: [parseHostRule("up.example.com") as HostRule], privateAllowed },
      resolve: async () => ["127.0.0.1"],
      // Far past the test's own timeout: only the ends under test may close a tunnel here.
      idleTimeoutMs: 3_600_000,
      onConnection: (r) => recs.push(r),
    });
    port = (await p.listen("127.0.0.1", 0)).port;
  });
  after(() => p.close());

  const tunnel = (target: string): Promise<net.Socket> =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, method: "CONNECT", path: target });
      req.on("connect", (_res, socket) => resolve(socket));
      req.on("error", reject);
      req.end();
    });

  it("an upstream that closes right after its data: the client still gets every byte", async () => {
    const raw = await tunnel(`up.example.com:${bulkPort}`);
    const s = tls.connect({
      socket: raw,
      servername: "up.example.com",
      ca: readFileSync(join(dir, "ca2", "ca.pem")),
      checkServerIdentity: () => undefined,
    });
    let got = 0;
    await new Promise<void>((resolve) => {
      s.on("data", (b: Buffer) => {
        got += b.length;
      });
      s.on("close", () => resolve());
      s.on("error", () => resolve());
    });
    assert.equal(got, BULK);
  });

  it("a client's FIN closes its tunnel at once (no wait for the idle timeout)", async () => {
    const raw = await tunnel(`up.example.com:${httpsPort}`);
    const s = tls.connect({
      socket: raw,
      servername: "up.example.com",
      ca,
      checkServerIdentity: () => undefined,
    });
    await new Promise<void>((r) => s.once("secureConnect", () => r()));
    const before = recs.length;
    raw.end(); // a plain FIN, no TLS close_notify (a killed process, Python without unwrap)
    // The idle timeout is an hour: a record (the tunnel closed) can only come from the FIN.
    await until("the tunnel closed by the client's FIN", () => recs.length > before);
  });

  it("a forward client that leaves mid-body stops the upstream transfer", async () => {
    const before = recs.length;
    await new Promise<void>((resolve) => {
      const req = http.request(
        {
          host: "127.0.0.1",
          port,
          path: `http://up.example.com:${bigPort}/`,
          headers: { host: `up.example.com:${bigPort}` },
        },
        (res) => {
          let n = 0;
          res.on("data", (b: Buffer) => {
            n += b.length;
            if (n > 4 * 1024 * 1024) req.destroy();
          });
          res.on("close", () => resolve());
        },
      );
      req.on("error", () => resolve());
      req.end();
    });
    await until("the forward request recorded", () => recs.length > before);
    const r = recs.at(-1);
    assert.ok(r !== undefined && r.method === "GET");
    assert.ok(r.bytesDown < 100 * 1024 * 1024, `${r.bytesDown} bytes read from the upstream`);
  });
});
