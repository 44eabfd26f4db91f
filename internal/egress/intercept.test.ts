/**
 * TLS interception on loopback only: a real HTTPS upstream for "api.test" (its certificate
 * from a CA made here, standing in for a public one) that records and echoes headers, and
 * a harness that does what the proxy does after a CONNECT (reads the ClientHello, then
 * calls intercept). Clients are real https clients trusting the run's CA. Checked: the
 * credential reaches the upstream in place of the client's, echoes of it are masked (also
 * split over chunks), a wrong Host is refused before anything goes upstream, hanging and
 * untrusted upstreams answer 504 and 502, keep-alive, and the byte limits.
 */
import assert from "node:assert/strict";
import type http from "node:http";
import https from "node:https";
import net from "node:net";
import { after, before, it } from "node:test";
import tls from "node:tls";
import zlib from "node:zlib";
import {
  type InterceptedRequest,
  type InterceptOptions,
  type InterceptResult,
  intercept,
} from "./intercept.ts";
import { createRunCa, type RunCa } from "./run-ca.ts";
import { MAX_HELLO_BYTES, readSni } from "./sni.ts";

const SECRET = "ghp_Zq8v2LmN4xR7tY1wK9sD3fH6jB0cE5aG";
const CREDENTIALS = { Authorization: `Bearer ${SECRET}` };
const BIG = 1024 * 1024;

let runCa: RunCa;
let upstreamCa: RunCa;
let upPort: number;
let untrustedPort: number;
let wrongNamePort: number;
let blackHolePort: number;
const seen: { url: string; headers: http.IncomingHttpHeaders; bodyBytes: number }[] = [];
/** /slow holds its second event until the test calls this (or 60 s pass: a safety net). */
let releaseSlow: (() => void) | undefined;
/** What happened around /slow, in order. */
const slowOrder: string[] = [];
const servers: net.Server[] = [];

async function listen(s: net.Server): Promise<number> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return (s.address() as net.AddressInfo).port;
}

/** The upstream: records each request, then answers by path. */
function upstream(req: http.IncomingMessage, res: http.ServerResponse): void {
  let bodyBytes = 0;
  req.on("data", (b: Buffer) => {
    bodyBytes += b.length;
  });
  req.on("end", () => {
    seen.push({ url: req.url ?? "", headers: req.headers, bodyBytes });
    const auth = String(req.headers.authorization ?? "");
    if (req.url === "/echo") {
      const body = JSON.stringify({ headers: req.headers });
      res.writeHead(200, { "content-type": "application/json", "x-echo-auth": auth });
      res.end(body);
    } else if (req.url === "/split") {
      // The token alone, cut in two writes that reach the client as separate chunks.
      const token = auth.slice("Bearer ".length);
      res.writeHead(200, { "content-type": "text/plain" });
      res.write(`token=${token.slice(0, 10)}`);
      setTimeout(() => res.end(`${token.slice(10)} end`), 100);
    } else if (req.url === "/gzip") {
      // Compressed whatever the request asked for.
      res.writeHead(200, { "content-encoding": "gzip", "content-type": "text/plain" });
      res.end(zlib.gzipSync(`auth was ${auth}`));
    } else if (req.url === "/compress") {
      res.writeHead(200, { "content-encoding": "compress" });
      res.end(`auth was ${auth}`);
    } else if (req.url === "/slow") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      let ended = false;
      const end = (why: string): void => {
        if (ended) return;
        ended = true;
        clearTimeout(safety);
        slowOrder.push(why);
        res.end("data: second\n\n");
      };
      const safety = setTimeout(() => end("the second sent after 60 s, unasked"), 60_000);
      releaseSlow = () => end("the second sent");
    } else if (req.url === "/big") {
      res.end(Buffer.alloc(BIG, "a"));
    } else if (req.url === "/hang") {
      // never answers
    } else {
      res.end(`${req.method} ${req.url} ${bodyBytes}`);
    }
  });
}

before(async () => {
  runCa = await createRunCa({ runId: "run-intercept" });
  upstreamCa = await createRunCa({ runId: "upstream-roots" });
  const stranger = await createRunCa({ runId: "stranger" });
  const good = await upstreamCa.leafFor("api.test");
  upPort = await listen(https.createServer({ cert: good.certPem, key: good.keyPem }, upstream));
  const bad = await stranger.leafFor("api.test");
  untrustedPort = await listen(
    https.createServer({ cert: bad.certPem, key: bad.keyPem }, upstream),
  );
  const other = await upstreamCa.leafFor("other.test");
  wrongNamePort = await listen(
    https.createServer({ cert: other.certPem, key: other.keyPem }, upstream),
  );
  blackHolePort = await listen(net.createServer(() => undefined)); // accepts, never speaks TLS
});

after(() => {
  for (const s of servers) s.close();
});

/** What the proxy does after `200 Connection Established`: read the ClientHello, pause. */
function readHello(socket: net.Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const sni = readSni(buf);
      if (sni.kind === "need-more" && buf.length < MAX_HELLO_BYTES) return;
      socket.off("data", onData);
      socket.pause();
      if (sni.kind === "sni" && sni.name === "api.test") resolve(buf);
      else reject(new Error(`unexpected ClientHello: ${JSON.stringify(sni)}`));
    };
    socket.on("data", onData);
  });
}

interface Harness {
  port: number;
  results: Promise<InterceptResult>[];
  records: InterceptedRequest[];
}

/** A listener that hands each connection to intercept, with `over` on top of the defaults. */
async function harness(over: Partial<InterceptOptions> = {}): Promise<Harness> {
  const h: Harness = { port: 0, results: [], records: [] };
  const server = net.createServer((socket) => {
    h.results.push(
      readHello(socket).then((hello) =>
        intercept(socket, hello, {
          host: "api.test",
          port: upPort,
          address: "127.0.0.1",
          ca: runCa,
          headers: CREDENTIALS,
          upstreamCa: upstreamCa.certPem,
          maxBytes: 16 * BIG,
          idleTimeoutMs: 5000,
          connectTimeoutMs: 5000,
          onRequest: (r) => h.records.push(r),
          ...over,
        }),
      ),
    );
  });
  h.port = await listen(server);
  return h;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An https request through the harness as a sandbox would make it (trusting the run CA). */
function request(
  port: number,
  path: string,
  o: { headers?: Record<string, string>; method?: string; body?: Buffer; agent?: https.Agent } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port,
        servername: "api.test",
        ca: runCa.certPem,
        path,
        method: o.method ?? "GET",
        headers: { host: "api.test", ...o.headers },
        agent: o.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (b: Buffer) => chunks.push(b));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(o.body);
  });
}

it("the upstream gets the credential in place of the client's; echoes of it reach the client masked", async () => {
  const h = await harness();
  const before = seen.length;
  const r = await request(h.port, "/echo", {
    headers: { authorization: "Bearer sandbox-made-this-up", "accept-encoding": "gzip, br" },
  });
  assert.equal(r.status, 200);
  const got = seen.slice(before);
  assert.equal(got.length, 1);
  assert.equal(got[0]?.headers.authorization, `Bearer ${SECRET}`);
  assert.equal(got[0]?.headers["accept-encoding"], "identity");
  assert.equal(got[0]?.headers.host, "api.test");
  assert.ok(!r.body.includes(SECRET), r.body);
  assert.ok(!JSON.stringify(r.headers).includes(SECRET));
  assert.equal(r.headers["x-echo-auth"], "[REDACTED]");
  assert.equal(JSON.parse(r.body).headers.authorization, "[REDACTED]");
  assert.equal(r.headers["content-length"], undefined); // masking may change the length
  const result = await h.results[0];
  assert.equal(result?.requests, 1);
  assert.ok((result?.bytesUp ?? 0) > 0 && (result?.bytesDown ?? 0) > r.body.length);
  assert.deepEqual(
    h.records.map((x) => [x.method, x.path, x.status, x.bytesDown]),
    [["GET", "/echo", 200, Buffer.byteLength(r.body)]],
  );
});

it("a token split over two chunks is masked all the same", async () => {
  const h = await harness();
  const r = await request(h.port, "/split");
  assert.equal(r.body, "token=[REDACTED] end");
  await h.results[0];
});

it("a streamed body is passed on as it comes, not held to its end", async () => {
  const h = await harness();
  // The upstream sends its second event only once the client has the first: a body held
  // to its end would reach the client only after the upstream's 60 s safety net.
  const body = await new Promise<string>((resolve, reject) => {
    https
      .get(
        {
          host: "127.0.0.1",
          port: h.port,
          servername: "api.test",
          ca: runCa.certPem,
          path: "/slow",
          headers: { host: "api.test" },
          agent: false,
        },
        (res) => {
          let body = "";
          res.on("data", (b: Buffer) => {
            body += b.toString();
            if (body.includes("first") && !slowOrder.includes("the client has the first")) {
              slowOrder.push("the client has the first");
              releaseSlow?.();
            }
          });
          res.on("end", () => resolve(body));
        },
      )
      .on("error", reject);
  });
  assert.equal(body, "data: first\n\ndata: second\n\n");
  assert.deepEqual(slowOrder, ["the client has the first", "the second sent"]);
  await h.results[0];
});

it("a kept-alive connection serves another request, then, left idle, is closed", async () => {
  const h = await harness({ idleTimeoutMs: 1000 });
  // A raw client: Node's agent closes by itself on the server's keep-alive hint.
  const socket = tls.connect({
    host: "127.0.0.1",
    port: h.port,
    servername: "api.test",
    ca: runCa.certPem,
  });
  socket.on("error", () => undefined);
  let got = "";
  let wake: (() => void) | undefined;
  socket.on("data", (b: Buffer) => {
    got += b.toString();
    wake?.();
  });
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const bodiesEnded = (): number => got.split("\r\n0\r\n\r\n").length - 1; // chunked ends
  const answered = async (n: number): Promise<void> => {
    while (bodiesEnded() < n) await new Promise<void>((r) => (wake = r));
  };
  socket.write("GET /a HTTP/1.1\r\nhost: api.test\r\n\r\n");
  await answered(1);
  // Kept alive, not closed after its answer: the same connection takes a second request.
  socket.write("GET /b HTTP/1.1\r\nhost: api.test\r\n\r\n");
  await answered(2);
  // The client stays quiet and never closes: only the idle timeout can end the connection.
  const result = await h.results[0];
  await closed;
  assert.match(got, /^HTTP\/1\.1 200 OK\r\n[\s\S]*connection: keep-alive\r\n/i);
  assert.equal(result?.requests, 2);
});

it("a body compressed against accept-encoding is decoded and masked; an unknown coding is refused", async () => {
  const h = await harness();
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const gz = await request(h.port, "/gzip", { agent });
  assert.equal(gz.status, 200);
  assert.equal(gz.headers["content-encoding"], undefined);
  assert.equal(gz.body, "auth was [REDACTED]");
  const odd = await request(h.port, "/compress", { agent });
  assert.equal(odd.status, 502);
  assert.match(odd.body, /content encoding that cannot be checked for credentials: compress/);
  assert.ok(!odd.body.includes(SECRET));
  agent.destroy();
  await h.results[0];
});

it("a chunked request body goes upstream whole", async () => {
  const h = await harness();
  const body = await new Promise<string>((resolve, reject) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port: h.port,
        servername: "api.test",
        ca: runCa.certPem,
        method: "DELETE",
        path: "/chunked",
        headers: { host: "api.test", "transfer-encoding": "chunked" },
        agent: false,
      },
      (res) => {
        let got = "";
        res.on("data", (b: Buffer) => (got += b.toString()));
        res.on("end", () => resolve(got));
      },
    );
    req.on("error", reject);
    req.write(Buffer.alloc(1000));
    setTimeout(() => req.end(Buffer.alloc(234)), 50);
  });
  assert.equal(body, "DELETE /chunked 1234");
  assert.equal(h.records[0]?.bytesUp, 1234);
  await h.results[0];
});

it("a Host other than the CONNECT host is refused with 421 and nothing goes upstream", async () => {
  const h = await harness();
  const before = seen.length;
  const wrong = await request(h.port, "/echo", { headers: { host: "evil.test" } });
  assert.equal(wrong.status, 421);
  assert.match(
    wrong.body,
    /this connection is for api\.test:\d+; the request's Host is "evil.test"/,
  );
  const absolute = await request(h.port, "https://evil.test/echo");
  assert.equal(absolute.status, 421);
  const withPort = await request(h.port, "/plain", { headers: { host: `api.test:${upPort}` } });
  assert.equal(withPort.status, 200);
  assert.equal(seen.length, before + 1);
  assert.equal(seen.at(-1)?.url, "/plain");
  assert.deepEqual(
    h.records.map((x) => x.status),
    [421, 421, 200],
  );
});

it("keep-alive: three requests on one connection count three", async () => {
  const h = await harness();
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  for (const path of ["/a", "/b", "/c"]) {
    const r = await request(h.port, path, { agent });
    assert.equal(r.body, `GET ${path} 0`);
  }
  agent.destroy();
  assert.equal(h.results.length, 1);
  const result = await h.results[0];
  assert.equal(result?.requests, 3);
  assert.deepEqual(
    h.records.map((x) => x.path),
    ["/a", "/b", "/c"],
  );
});

it("an upstream that never finishes its handshake gives 504 when the connect timeout fires", async () => {
  const h = await harness({ port: blackHolePort, connectTimeoutMs: 400 });
  // The black hole never finishes a handshake: only the connect timeout can answer.
  const r = await request(h.port, "/echo");
  assert.equal(r.status, 504);
  assert.match(r.body, /could not be reached within 400 ms/);
  await h.results[0];
});

it("an upstream that stops answering gives 504 when the idle timeout fires", async () => {
  const h = await harness({ idleTimeoutMs: 400 });
  // /hang never answers: only the idle timeout can.
  const r = await request(h.port, "/hang");
  assert.equal(r.status, 504);
  assert.match(r.body, /did not answer within 400 ms/);
  await h.results[0];
});

it("an upstream whose certificate is not trusted, or not for the host, gives 502 and gets no request", async () => {
  const before = seen.length;
  for (const port of [untrustedPort, wrongNamePort]) {
    const h = await harness({ port });
    const r = await request(h.port, "/echo");
    assert.equal(r.status, 502);
    assert.match(r.body, /^egress: api\.test:\d+ failed: \S+/);
    assert.ok(!r.body.includes(SECRET));
    await h.results[0];
  }
  assert.equal(seen.length, before);
  // Verification is asked for explicitly: the environment switch does not turn it off.
  const h0 = await harness({ port: untrustedPort });
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  try {
    assert.equal((await request(h0.port, "/echo")).status, 502);
  } finally {
    delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  }
  // Node's default roots do not include the test CA either.
  const h = await harness({ upstreamCa: undefined });
  assert.equal((await request(h.port, "/echo")).status, 502);
});

it("a credential header value that cannot be sent gives 502 without the value", async () => {
  const value = `Bearer ${SECRET}\r\nx-injected: 1`;
  const h = await harness({ headers: { authorization: value } });
  const r = await request(h.port, "/echo");
  assert.equal(r.status, 502);
  assert.ok(!r.body.includes(SECRET) && !JSON.stringify(r.headers).includes(SECRET), r.body);
  await h.results[0];
});

it("maxBytes cuts a download and an upload", async () => {
  const limit = 64 * 1024;
  const h = await harness({ maxBytes: limit });
  await assert.rejects(request(h.port, "/big"));
  const down = await h.results[0];
  assert.ok((down?.bytesDown ?? 0) <= limit, `${down?.bytesDown}`);
  assert.equal(h.records[0]?.path, "/big");
  const before = seen.length;
  await assert.rejects(request(h.port, "/upload", { method: "POST", body: Buffer.alloc(BIG) }));
  const up = await h.results[1];
  assert.ok((up?.bytesUp ?? 0) <= limit, `${up?.bytesUp}`);
  assert.ok((h.records[1]?.bytesUp ?? 0) < limit);
  assert.ok(seen.slice(before).every((s) => s.bodyBytes < limit));
});

it("a client that goes away mid-request ends the upstream request and intercept resolves", async () => {
  const h = await harness();
  const socketClosed = new Promise<void>((resolve) => {
    const req = https.request({
      host: "127.0.0.1",
      port: h.port,
      servername: "api.test",
      ca: runCa.certPem,
      path: "/hang",
      headers: { host: "api.test" },
      agent: false,
    });
    req.on("error", () => resolve());
    req.end();
    setTimeout(() => req.destroy(), 200);
  });
  await socketClosed;
  const result = await h.results[0];
  assert.equal(result?.requests, 1);
  assert.equal(h.records[0]?.status, 0);
});
