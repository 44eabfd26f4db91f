#!/usr/bin/env node
/**
 * The egress proxy's cost (issue #16): `node bench/egress.ts [--requests 2000] [--mb 100]
 * [--rounds 3]` (what `make bench` runs; never run by the tests). Everything on 127.0.0.1,
 * port 0, in three processes: this one (the client, as a sandbox would be), an upstream
 * (an HTTP and an HTTPS server; the certificate is for up.example.com, which the proxy's
 * `resolve` maps to 127.0.0.1) and `createEgressProxy` (up.example.com allowed, 127.0.0.1
 * named as an allowed private address; the connection and byte limits raised so the bench
 * is not cut). Direct and proxied sides alternate in every round (the order flips each
 * round); the figures are medians over the rounds.
 *
 *   (a) latency of --requests sequential GETs of a 100-byte body, p50 and p99:
 *       HTTP   direct with a keep-alive agent vs the proxy as a forward proxy (absolute
 *              URL; a keep-alive agent on the client → proxy leg);
 *       HTTPS  a new connection per request on both sides, TLS handshake included:
 *              direct TLS vs CONNECT to the proxy, then TLS through the tunnel.
 *       Target: proxy / direct <= 1.2 (p50 and p99).
 *   (b) throughput of a --mb MB (10^6 bytes) download: HTTP forward and HTTPS through a
 *       CONNECT tunnel, each against its direct twin. Target: proxy / direct >= 0.8.
 *   (c) checks on a tunnel's ends: a download the upstream closes right after the body
 *       (`connection: close`) arrives whole; a tunnel whose client closes its TCP connection
 *       (a FIN, no TLS close_notify) is closed (and recorded) at the proxy within 2 s. And
 *       what the proxy holds in memory while a client stops reading a download.
 *
 * Also shown: the CPU each process spent per request and per MB (user + system, so the
 * loopback's kernel work is in it), and the proxy's RSS. The last line is JSON. Exit
 * status 1 when a check fails (a status or byte count is wrong, a download is cut, the
 * proxy refused or recorded other than what was sent), 2 on bad arguments; a missed
 * target is printed as MISSED, not an error. See bench/README.md.
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parseHostRule } from "../internal/egress/destination.ts";
import { type ConnectionRecord, createEgressProxy } from "../internal/egress/proxy.ts";
import { makeCa, sign } from "../internal/testing/certs.ts";

const HOST = "up.example.com";
const SMALL = Buffer.from(`${"x".repeat(99)}\n`);
const CHUNK = 256 * 1024;
const TARGET_LATENCY = 1.2;
const TARGET_THROUGHPUT = 0.8;
const SELF = fileURLToPath(import.meta.url);

type Kind = "http" | "https";
type SideName = "direct" | "proxy";
const KINDS: readonly Kind[] = ["http", "https"];

/** What a child process answers to any message. */
interface ChildStats {
  cpuUs: number;
  rssBytes: number;
  /** Memory held in Buffers (after a full GC when asked "gc"). */
  bufferBytes: number;
  maxRssBytes: number;
  /** The proxy's records: allowed connections (requests, for forward HTTP) per method. */
  allowed: Record<string, number>;
  bytesDown: Record<string, number>;
  refused: string[];
}

function answerStats(extra: () => Partial<ChildStats>): void {
  process.on("message", (m) => {
    if (m === "gc") (globalThis as { gc?: () => void }).gc?.();
    const cpu = process.cpuUsage();
    process.send?.({
      cpuUs: cpu.user + cpu.system,
      rssBytes: process.memoryUsage.rss(),
      bufferBytes: process.memoryUsage().arrayBuffers,
      maxRssBytes: process.resourceUsage().maxRSS * 1024,
      allowed: {},
      bytesDown: {},
      refused: [],
      ...extra(),
    } satisfies ChildStats);
  });
}

// ---------------------------------------------------------------------------------------
// The upstream process: HTTP and HTTPS, /small (100 bytes) and /bulk?bytes=N.

function sendBulk(res: http.ServerResponse, total: number, chunk: Buffer): void {
  res.writeHead(200, {
    "content-type": "application/octet-stream",
    "content-length": String(total),
  });
  let left = total;
  const pump = (): void => {
    while (left > 0) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        res.once("drain", pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

async function upstreamRole(certDir: string): Promise<void> {
  const chunk = randomBytes(CHUNK);
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.pathname === "/small") {
      res.writeHead(200, { "content-type": "text/plain", "content-length": SMALL.length });
      res.end(SMALL);
    } else if (u.pathname === "/bulk") sendBulk(res, Number(u.searchParams.get("bytes")), chunk);
    else res.writeHead(404).end();
  };
  // Idle keep-alive connections stay open across rounds (no reset race on reuse).
  const keep = { keepAliveTimeout: 600_000 };
  const plain = http.createServer(keep, handler);
  const secure = https.createServer(
    {
      ...keep,
      cert: readFileSync(join(certDir, "up-cert.pem")),
      key: readFileSync(join(certDir, "up-key.pem")),
    },
    handler,
  );
  secure.on("tlsClientError", () => undefined);
  const listen = (srv: net.Server) =>
    new Promise<number>((r) =>
      srv.listen(0, "127.0.0.1", () => r((srv.address() as net.AddressInfo).port)),
    );
  const httpPort = await listen(plain);
  const httpsPort = await listen(secure);
  answerStats(() => ({}));
  process.send?.({ httpPort, httpsPort });
}

// ---------------------------------------------------------------------------------------
// The proxy process: createEgressProxy as agentd would run it, limits raised for the bench.

async function proxyRole(): Promise<void> {
  const rule = parseHostRule(HOST);
  if ("error" in rule) throw new Error(rule.error);
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  const allowed: Record<string, number> = {};
  const bytesDown: Record<string, number> = {};
  const refused: string[] = [];
  const proxy = createEgressProxy({
    check: { rules: [rule], privateAllowed },
    resolve: async (host) => (host === HOST ? ["127.0.0.1"] : []),
    // The defaults (64 at once; 1 GiB each way per connection) must not cut the bench; nor
    // may the run's totals (unbounded by default).
    maxConnections: 4096,
    maxBytes: Number.MAX_SAFE_INTEGER,
    maxTotalConnections: Number.POSITIVE_INFINITY,
    maxTotalBytes: Number.POSITIVE_INFINITY,
    onConnection: (r: ConnectionRecord) => {
      if (!r.allowed) refused.push(`${r.method} ${r.host}:${r.port}: ${r.reason}`);
      else {
        allowed[r.method] = (allowed[r.method] ?? 0) + 1;
        bytesDown[r.method] = (bytesDown[r.method] ?? 0) + r.bytesDown;
      }
    },
  });
  const { port } = await proxy.listen("127.0.0.1", 0);
  answerStats(() => ({ allowed, bytesDown, refused }));
  process.send?.({ port });
}

// ---------------------------------------------------------------------------------------
// The client (this process).

function startChild<T>(role: string, args: string[]): Promise<{ child: ChildProcess; hello: T }> {
  const child = fork(SELF, ["--role", role, ...args], {
    execArgv: [...process.execArgv, "--expose-gc"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (hello) => resolve({ child, hello: hello as T }));
    child.once("exit", (code) => reject(new Error(`the ${role} process exited (${code})`)));
  });
}

function ask(child: ChildProcess, what: "stats" | "gc" = "stats"): Promise<ChildStats> {
  return new Promise((resolve) => {
    child.once("message", (m) => resolve(m as ChildStats));
    child.send(what);
  });
}

interface Cpu {
  client: number;
  upstream: number;
  proxy: number;
}

interface Ctx {
  httpPort: number;
  httpsPort: number;
  proxyPort: number;
  ca: Buffer;
  upstream: ChildProcess;
  proxy: ChildProcess;
  directAgent: http.Agent;
  proxyAgent: http.Agent;
  failures: string[];
  /** What the proxy must have recorded: allowed forward GETs and tunnels, and GET body bytes. */
  sent: { GET: number; CONNECT: number; getBytes: number; tunnelBytes: number };
}

function check(ctx: Ctx, ok: boolean, what: string): void {
  if (!ok && ctx.failures.length < 20) ctx.failures.push(what);
}

/** CPU time (µs) each process has used so far. */
async function cpuNow(ctx: Ctx): Promise<Cpu> {
  const [up, px] = await Promise.all([ask(ctx.upstream), ask(ctx.proxy)]);
  const c = process.cpuUsage();
  return { client: c.user + c.system, upstream: up.cpuUs, proxy: px.cpuUs };
}

const cpuPer = (a: Cpu, b: Cpu, per: number): Cpu => ({
  client: (b.client - a.client) / per,
  upstream: (b.upstream - a.upstream) / per,
  proxy: (b.proxy - a.proxy) / per,
});

/** A GET over the side's keep-alive agent; the body's byte count. */
function httpGet(
  ctx: Ctx,
  proxied: boolean,
  path: string,
): Promise<{ status: number; bytes: number }> {
  const headers = { host: `${HOST}:${ctx.httpPort}` };
  const opts: http.RequestOptions = proxied
    ? {
        host: "127.0.0.1",
        port: ctx.proxyPort,
        path: `http://${HOST}:${ctx.httpPort}${path}`,
        agent: ctx.proxyAgent,
        headers,
      }
    : { host: "127.0.0.1", port: ctx.httpPort, path, agent: ctx.directAgent, headers };
  return new Promise((resolve, reject) => {
    const req = http.get(opts, (res) => {
      let bytes = 0;
      res.on("data", (b: Buffer) => {
        bytes += b.length;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/** A new TLS connection to the HTTPS upstream, directly or through a CONNECT tunnel. */
async function tlsOpen(ctx: Ctx, proxied: boolean): Promise<tls.TLSSocket> {
  let socket: net.Socket | undefined;
  if (proxied)
    socket = await new Promise<net.Socket>((resolve, reject) => {
      const req = http.request({
        host: "127.0.0.1",
        port: ctx.proxyPort,
        method: "CONNECT",
        path: `${HOST}:${ctx.httpsPort}`,
        agent: false,
      });
      req.on("connect", (res: http.IncomingMessage, s: net.Socket) => {
        if (res.statusCode === 200) return resolve(s);
        s.destroy();
        reject(new Error(`CONNECT: ${res.statusCode} ${res.headers["x-agentd-egress"] ?? ""}`));
      });
      req.on("error", reject);
      req.end();
    });
  const t = tls.connect(
    socket !== undefined
      ? { socket, servername: HOST, ca: ctx.ca }
      : { host: "127.0.0.1", port: ctx.httpsPort, servername: HOST, ca: ctx.ca },
  );
  await new Promise<void>((resolve, reject) => {
    t.once("secureConnect", resolve);
    t.once("error", reject);
  });
  return t;
}

/**
 * One HTTP/1.1 GET on a new TLS socket, read to its content-length (the body counted, not
 * kept). With `close`, the request says `connection: close` (the upstream closes the
 * connection right after the body); without, the client closes it after reading the body
 * (the caller destroys the socket: a FIN without a TLS close_notify, as a killed process or
 * Python's ssl without unwrap() leaves it).
 */
function tlsGet(
  s: tls.TLSSocket,
  path: string,
  close: boolean,
): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    let status = 0;
    let want = -1;
    let got = 0;
    const done = (err?: Error): void => {
      s.off("data", onData);
      s.off("error", done);
      s.off("close", onClose);
      if (err) reject(err);
      else resolve({ status, bytes: got });
    };
    const onClose = (): void =>
      done(
        new Error(
          `the connection closed before the response ended (${want < 0 ? "no headers" : `${got} of ${want} body bytes`})`,
        ),
      );
    const onData = (b: Buffer): void => {
      if (want < 0) {
        head = Buffer.concat([head, b]);
        const i = head.indexOf("\r\n\r\n");
        if (i < 0) return;
        const text = head.subarray(0, i).toString("latin1");
        status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
        const len = /\r\ncontent-length: *(\d+)/i.exec(text)?.[1];
        if (len === undefined) {
          done(new Error("a response without content-length"));
          return;
        }
        want = Number(len);
        got = head.length - i - 4;
      } else got += b.length;
      if (got >= want) done();
    };
    s.on("data", onData);
    s.on("error", done);
    s.on("close", onClose);
    s.write(`GET ${path} HTTP/1.1\r\nhost: ${HOST}\r\n${close ? "connection: close\r\n" : ""}\r\n`);
  });
}

/**
 * One GET of `path`: ms, or NaN when it failed. HTTPS is a new TLS connection each time:
 * for the small GETs the upstream closes it (`connection: close`, as a one-shot client
 * such as Python's urllib asks), for the downloads the client closes it after the body,
 * unless `upstreamCloses`.
 */
async function fetchOnce(
  ctx: Ctx,
  kind: Kind,
  proxied: boolean,
  path: string,
  size: number,
  upstreamCloses = size === SMALL.length,
): Promise<number> {
  const what = `${kind} ${proxied ? "proxy" : "direct"} GET ${path}`;
  const t0 = performance.now();
  let s: tls.TLSSocket | undefined;
  try {
    let r: { status: number; bytes: number };
    if (kind === "http") r = await httpGet(ctx, proxied, path);
    else {
      s = await tlsOpen(ctx, proxied);
      r = await tlsGet(s, path, upstreamCloses);
    }
    const ms = performance.now() - t0;
    if (proxied && kind === "http") {
      ctx.sent.GET++;
      ctx.sent.getBytes += r.bytes;
    } else if (proxied) {
      ctx.sent.CONNECT++;
      ctx.sent.tunnelBytes += r.bytes;
    }
    const ok = r.status === 200 && r.bytes === size;
    check(ctx, ok, `${what}: status ${r.status}, ${r.bytes} of ${size} bytes`);
    return ok ? ms : Number.NaN;
  } catch (err) {
    if (proxied) ctx.sent[kind === "http" ? "GET" : "CONNECT"]++;
    check(ctx, false, `${what}: ${(err as Error).message}`);
    return Number.NaN;
  } finally {
    s?.destroy();
  }
}

interface LatencyRound {
  p50: number;
  p99: number;
  /** CPU µs per request, per process. */
  cpu: Cpu;
}
interface ThroughputRound {
  mbs: number;
  /** CPU ms per MB, per process. */
  cpu: Cpu;
}

/** n sequential small GETs: p50, p99 (ms) and CPU per request. */
async function latencyRound(
  ctx: Ctx,
  kind: Kind,
  proxied: boolean,
  n: number,
): Promise<LatencyRound> {
  const c0 = await cpuNow(ctx);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) xs.push(await fetchOnce(ctx, kind, proxied, "/small", SMALL.length));
  const c1 = await cpuNow(ctx);
  const ok = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  return { p50: percentile(ok, 50), p99: percentile(ok, 99), cpu: cpuPer(c0, c1, n) };
}

/** One download of `bytes`: MB/s (NaN when it failed) and CPU per MB. */
async function throughputRound(
  ctx: Ctx,
  kind: Kind,
  proxied: boolean,
  bytes: number,
): Promise<ThroughputRound> {
  const c0 = await cpuNow(ctx);
  const ms = await fetchOnce(ctx, kind, proxied, `/bulk?bytes=${bytes}`, bytes);
  const c1 = await cpuNow(ctx);
  return { mbs: bytes / 1e6 / (ms / 1000), cpu: cpuPer(c0, c1, (1000 * bytes) / 1e6) };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

/** The median (a failed sample's NaN left out). */
function median(xs: readonly number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

const medianCpu = (rs: readonly { cpu: Cpu }[]): Cpu => ({
  client: median(rs.map((r) => r.cpu.client)),
  upstream: median(rs.map((r) => r.cpu.upstream)),
  proxy: median(rs.map((r) => r.cpu.proxy)),
});
const total = (c: Cpu): number => c.client + c.upstream + c.proxy;
const round = (n: number, d = 3): number => Number(n.toFixed(d));
const us = (ms: number): string => `${Math.round(ms * 1000).toLocaleString("en-US")} µs`;
const x = (n: number): string => `${n.toFixed(2)}x`;
const verdict = (ok: boolean): string => (ok ? "MET" : "MISSED");

function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows
    .map(
      (r) =>
        `    ${r
          .map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)))
          .join("   ")}`,
    )
    .join("\n");
}

/**
 * What the proxy holds in Buffers (after a full GC: live data only) once a client, through
 * it, has stopped reading a download of `bytes` for 2 s, less what it held before.
 */
async function stalled(ctx: Ctx, kind: Kind, bytes: number): Promise<number> {
  const path = `/bulk?bytes=${bytes}`;
  await new Promise((r) => setTimeout(r, 500)); // the connections before it closed
  const held0 = (await ask(ctx.proxy, "gc")).bufferBytes;
  let stop: () => void;
  if (kind === "http") {
    const req = http.get({
      host: "127.0.0.1",
      port: ctx.proxyPort,
      path: `http://${HOST}:${ctx.httpPort}${path}`,
      headers: { host: `${HOST}:${ctx.httpPort}` },
      agent: false,
    });
    await new Promise<void>((resolve, reject) => {
      req.once("response", (res: http.IncomingMessage) => {
        res.pause();
        res.on("error", () => undefined);
        resolve();
      });
      req.once("error", reject);
    });
    req.on("error", () => undefined);
    stop = () => req.destroy();
  } else {
    const s = await tlsOpen(ctx, true);
    s.write(`GET ${path} HTTP/1.1\r\nhost: ${HOST}\r\n\r\n`);
    await new Promise((r) => s.once("data", r));
    s.pause();
    stop = () => s.destroy();
  }
  await new Promise((r) => setTimeout(r, 2000));
  const held1 = (await ask(ctx.proxy, "gc")).bufferBytes;
  stop();
  return held1 - held0;
}

/** Waits (up to 2 s) until the proxy has recorded every connection sent through it: it reports a tunnel when it closes. */
async function settledRecords(ctx: Ctx): Promise<ChildStats> {
  const deadline = performance.now() + 2000;
  for (;;) {
    const s = await ask(ctx.proxy);
    const n = (s.allowed.GET ?? 0) + (s.allowed.CONNECT ?? 0) + s.refused.length;
    if (n >= ctx.sent.GET + ctx.sent.CONNECT || performance.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function client(requests: number, mb: number, rounds: number): Promise<number> {
  const started = performance.now();
  const load0 = loadavg()[0] as number;
  const dir = mkdtempSync(join(tmpdir(), "agentd-bench-egress-"));
  const children: ChildProcess[] = [];
  const stop = (): void => {
    for (const c of children) if (c.exitCode === null) c.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("SIGINT", () => {
    stop();
    process.exit(130);
  });
  try {
    makeCa(dir);
    sign(dir, "up", `/CN=${HOST}`, `subjectAltName=DNS:${HOST}\nextendedKeyUsage=serverAuth\n`);
    const up = await startChild<{ httpPort: number; httpsPort: number }>("upstream", [
      "--certs",
      dir,
    ]);
    children.push(up.child);
    const px = await startChild<{ port: number }>("proxy", []);
    children.push(px.child);
    const ctx: Ctx = {
      ...up.hello,
      proxyPort: px.hello.port,
      ca: readFileSync(join(dir, "ca.pem")),
      upstream: up.child,
      proxy: px.child,
      directAgent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
      proxyAgent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
      failures: [],
      sent: { GET: 0, CONNECT: 0, getBytes: 0, tunnelBytes: 0 },
    };
    const rss0 = (await ask(px.child)).rssBytes;
    const bytes = Math.round(mb * 1e6);
    const warm = Math.max(50, Math.round(requests / 10));
    console.log(
      `bench/egress: node ${process.version}, ${availableParallelism()} CPUs, load average ${load0.toFixed(2)}; client, upstream and proxy in 3 processes on 127.0.0.1`,
    );
    console.log(
      `  ${rounds} rounds, direct and proxy alternating (order flipped each round); per side and round: ${requests} GETs of ${SMALL.length} bytes over HTTP and as many over HTTPS (a new connection each), one ${mb} MB download over each; ${warm} + ${warm} GETs and 10 MB downloads of warm-up per side`,
    );

    // Warm-up: JIT, keep-alive connections, the proxy's upstream agent.
    for (const proxied of [false, true])
      for (const kind of KINDS) {
        for (let i = 0; i < warm; i++) await fetchOnce(ctx, kind, proxied, "/small", SMALL.length);
        const w = Math.min(bytes, 10e6);
        await fetchOnce(ctx, kind, proxied, `/bulk?bytes=${w}`, w);
      }

    const lat = {
      http: { direct: [] as LatencyRound[], proxy: [] as LatencyRound[] },
      https: { direct: [] as LatencyRound[], proxy: [] as LatencyRound[] },
    };
    const thr = {
      http: { direct: [] as ThroughputRound[], proxy: [] as ThroughputRound[] },
      https: { direct: [] as ThroughputRound[], proxy: [] as ThroughputRound[] },
    };
    for (let i = 0; i < rounds; i++) {
      const order: SideName[] = i % 2 === 0 ? ["direct", "proxy"] : ["proxy", "direct"];
      for (const kind of KINDS)
        for (const side of order)
          lat[kind][side].push(await latencyRound(ctx, kind, side === "proxy", requests));
      for (const kind of KINDS)
        for (const side of order)
          thr[kind][side].push(await throughputRound(ctx, kind, side === "proxy", bytes));
      const lr = (k: Kind, q: "p50" | "p99") =>
        x((lat[k].proxy[i]?.[q] as number) / (lat[k].direct[i]?.[q] as number));
      const tr = (k: Kind) =>
        x((thr[k].proxy[i]?.mbs as number) / (thr[k].direct[i]?.mbs as number));
      console.log(
        `  round ${i + 1}: proxy/direct   HTTP p50 ${lr("http", "p50")} p99 ${lr("http", "p99")}   HTTPS p50 ${lr("https", "p50")} p99 ${lr("https", "p99")}   MB/s HTTP ${tr("http")} HTTPS ${tr("https")}`,
      );
    }

    // The tunnel's ends: a download the upstream closes right after the body must arrive
    // whole; every tunnel (the downloads' ones, which the client closed with a bare FIN) must
    // be closed.
    const whole = !Number.isNaN(
      await fetchOnce(ctx, "https", true, `/bulk?bytes=${bytes}`, bytes, true),
    );

    // The proxy's records must account for exactly what went through it.
    const rec = await settledRecords(ctx);
    const stillOpen = ctx.sent.CONNECT - (rec.allowed.CONNECT ?? 0);
    check(
      ctx,
      rec.refused.length === 0,
      `the proxy refused: ${rec.refused.slice(0, 3).join("; ")}`,
    );
    check(
      ctx,
      rec.allowed.GET === ctx.sent.GET,
      `the proxy recorded ${rec.allowed.GET ?? 0} forward GETs, ${ctx.sent.GET} were sent`,
    );
    check(
      ctx,
      stillOpen === 0,
      `${stillOpen} of the ${ctx.sent.CONNECT} tunnels are still open at the proxy 2 s after the client closed them`,
    );
    check(
      ctx,
      rec.bytesDown.GET === ctx.sent.getBytes,
      `the proxy recorded ${rec.bytesDown.GET ?? 0} bytes down for forward GETs, the client got ${ctx.sent.getBytes}`,
    );
    check(
      ctx,
      stillOpen !== 0 || (rec.bytesDown.CONNECT ?? 0) >= ctx.sent.tunnelBytes,
      `the proxy recorded ${rec.bytesDown.CONNECT ?? 0} bytes down in tunnels, less than the ${ctx.sent.tunnelBytes} bytes of plaintext the client got`,
    );

    // A client that stops reading (after the records: its connection is cut, not finished).
    const end = await ask(px.child);
    const stall = {
      http: await stalled(ctx, "http", bytes),
      https: await stalled(ctx, "https", bytes),
    };

    // Report.
    const targets: Record<string, boolean> = {};
    const targetLines: string[] = [];
    const target = (name: string, label: string, ratio: number, ok: boolean, goal: string) => {
      targets[name] = ok;
      targetLines.push(
        `    ${label.padEnd(40)} ${x(ratio).padStart(6)} (target ${goal})   ${verdict(ok)}`,
      );
    };
    const label = { http: "HTTP forward, keep-alive", https: "HTTPS CONNECT, new conn + TLS" };
    const latRows = [
      ["", "direct p50", "proxy p50", "ratio", "direct p99", "proxy p99", "ratio", "added p50"],
    ];
    const cpuRows = [["CPU per request", "client", "upstream", "proxy", "total"]];
    const latJson: Record<string, unknown> = {};
    for (const kind of KINDS) {
      const L = lat[kind];
      const d50 = median(L.direct.map((r) => r.p50));
      const p50 = median(L.proxy.map((r) => r.p50));
      const d99 = median(L.direct.map((r) => r.p99));
      const p99 = median(L.proxy.map((r) => r.p99));
      latRows.push([
        label[kind],
        us(d50),
        us(p50),
        x(p50 / d50),
        us(d99),
        us(p99),
        x(p99 / d99),
        `+${us(p50 - d50)}`,
      ]);
      for (const side of ["direct", "proxy"] as const) {
        const c = medianCpu(L[side]);
        const f = (v: number) => `${Math.round(v)} µs`;
        cpuRows.push([
          `${kind.toUpperCase()} ${side}`,
          f(c.client),
          f(c.upstream),
          side === "proxy" ? f(c.proxy) : "-",
          f(side === "proxy" ? total(c) : c.client + c.upstream),
        ]);
      }
      latJson[kind] = {
        directP50Ms: round(d50),
        proxyP50Ms: round(p50),
        ratioP50: round(p50 / d50),
        directP99Ms: round(d99),
        proxyP99Ms: round(p99),
        ratioP99: round(p99 / d99),
        cpuUsPerRequest: { direct: medianCpu(L.direct), proxy: medianCpu(L.proxy) },
        rounds: L,
      };
      target(
        `${kind}LatencyP50`,
        `${label[kind]} p50`,
        p50 / d50,
        p50 / d50 <= TARGET_LATENCY,
        `<= ${TARGET_LATENCY}x`,
      );
      target(
        `${kind}LatencyP99`,
        `${label[kind]} p99`,
        p99 / d99,
        p99 / d99 <= TARGET_LATENCY,
        `<= ${TARGET_LATENCY}x`,
      );
    }
    const tlabel = { http: "HTTP forward", https: "HTTPS CONNECT tunnel" };
    const thrRows = [["", "direct MB/s", "proxy MB/s", "ratio", "ratio per round"]];
    const tcpuRows = [["CPU per MB", "client", "upstream", "proxy", "total", "cores busy"]];
    const ceilings: string[] = [];
    const thrJson: Record<string, unknown> = {};
    for (const kind of KINDS) {
      const T = thr[kind];
      const d = median(T.direct.map((r) => r.mbs));
      const p = median(T.proxy.map((r) => r.mbs));
      thrRows.push([
        tlabel[kind],
        d.toFixed(0),
        p.toFixed(0),
        x(p / d),
        T.proxy.map((r, j) => (r.mbs / (T.direct[j]?.mbs as number)).toFixed(2)).join(" "),
      ]);
      const cd = medianCpu(T.direct);
      const cp = medianCpu(T.proxy);
      const f = (v: number) => `${v.toFixed(2)} ms`;
      const dTotal = cd.client + cd.upstream;
      tcpuRows.push(
        [
          `${kind.toUpperCase()} direct`,
          f(cd.client),
          f(cd.upstream),
          "-",
          f(dTotal),
          ((dTotal * d) / 1000).toFixed(2),
        ],
        [
          `${kind.toUpperCase()} proxy`,
          f(cp.client),
          f(cp.upstream),
          f(cp.proxy),
          f(total(cp)),
          ((total(cp) * p) / 1000).toFixed(2),
        ],
      );
      ceilings.push(`${tlabel[kind]} ${x(dTotal / total(cp))}`);
      thrJson[kind] = {
        directMBs: round(d, 1),
        proxyMBs: round(p, 1),
        ratio: round(p / d),
        cpuMsPerMB: { direct: cd, proxy: cp },
        rounds: T,
      };
      target(
        `${kind}Throughput`,
        `${tlabel[kind]} MB/s`,
        p / d,
        p / d >= TARGET_THROUGHPUT,
        `>= ${TARGET_THROUGHPUT}x`,
      );
    }
    const load1 = loadavg()[0] as number;

    console.log(
      `\n(a) ${SMALL.length}-byte GETs: latency, the median over ${rounds} rounds of each round's p50 and p99 (${requests} per side and round)`,
    );
    console.log(table(latRows));
    console.log(table(cpuRows));
    console.log(`\n(b) a ${mb} MB download: the median over ${rounds} rounds`);
    console.log(table(thrRows));
    console.log(table(tcpuRows));
    console.log(
      `    CPU ceiling (when the cores, not the proxy, are the limit, proxy/direct MB/s <= direct CPU per MB / proxy-side CPU per MB): ${ceilings.join(", ")}`,
    );
    console.log(
      `    proxy process RSS: ${(rss0 / 2 ** 20).toFixed(0)} MiB at start, peak ${(end.maxRssBytes / 2 ** 20).toFixed(0)} MiB over (a) and (b)`,
    );
    console.log("\n(c) the tunnel's ends (checks), and a client that stops reading");
    console.log(
      `    the upstream closes right after a ${mb} MB body: the client got all of it     ${whole ? "ok" : "FAILED (below)"}`,
    );
    console.log(
      `    the client closes (FIN, no close_notify): every tunnel closed within 2 s  ${stillOpen === 0 ? "ok" : `FAILED (${stillOpen} still open)`}`,
    );
    console.log(
      `    a client stops reading a ${mb} MB download for 2 s: the proxy holds ${(stall.http / 2 ** 20).toFixed(1)} MiB more in buffers (HTTP forward), ${(stall.https / 2 ** 20).toFixed(1)} MiB (CONNECT tunnel)`,
    );
    console.log("\ntargets");
    console.log(targetLines.join("\n"));
    for (const f of ctx.failures) console.log(`FAILED: ${f}`);
    const seconds = round((performance.now() - started) / 1000, 1);
    console.log(
      `load average ${load0.toFixed(2)} at start, ${load1.toFixed(2)} at end; total ${seconds} s; checks ${ctx.failures.length === 0 ? "ok" : `FAILED (${ctx.failures.length})`}`,
    );
    console.log(
      JSON.stringify({
        bench: "egress",
        node: process.version,
        cpus: availableParallelism(),
        load: [round(load0, 2), round(load1, 2)],
        requests,
        mb,
        rounds,
        latency: latJson,
        throughput: thrJson,
        proxyRssMiB: {
          start: round(rss0 / 2 ** 20, 1),
          peak: round(end.maxRssBytes / 2 ** 20, 1),
          stalledClientBuffers: {
            http: round(stall.http / 2 ** 20, 1),
            https: round(stall.https / 2 ** 20, 1),
          },
        },
        proxyRecords: { allowed: rec.allowed, refused: rec.refused.length },
        targets,
        failures: ctx.failures,
        seconds,
      }),
    );
    ctx.directAgent.destroy();
    ctx.proxyAgent.destroy();
    return ctx.failures.length === 0 ? 0 : 1;
  } finally {
    stop();
  }
}

// ---------------------------------------------------------------------------------------

function parse(): { role?: string; certs?: string; requests: number; mb: number; rounds: number } {
  const { values } = parseArgs({
    options: {
      requests: { type: "string", default: "2000" },
      mb: { type: "string", default: "100" },
      rounds: { type: "string", default: "3" },
      role: { type: "string" },
      certs: { type: "string" },
    },
  });
  const num = (name: string, v: string, int: boolean): number => {
    const n = Number(v);
    if (!(n > 0) || (int && !Number.isInteger(n)))
      throw new Error(`--${name} ${v}: not a positive ${int ? "integer" : "number"}`);
    return n;
  };
  return {
    role: values.role,
    certs: values.certs,
    requests: num("requests", values.requests, true),
    mb: num("mb", values.mb, false),
    rounds: num("rounds", values.rounds, true),
  };
}

let args: ReturnType<typeof parse>;
try {
  args = parse();
} catch (err) {
  console.error(`bench/egress: ${(err as Error).message}`);
  console.error("usage: node bench/egress.ts [--requests 2000] [--mb 100] [--rounds 3]");
  process.exit(2);
}
if (args.role !== undefined) {
  // A child: it lives as long as the parent's IPC channel.
  process.on("disconnect", () => process.exit(0));
  await (args.role === "upstream" ? upstreamRole(args.certs as string) : proxyRole());
} else
  client(args.requests, args.mb, args.rounds).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`bench/egress: ${(err as Error).stack ?? String(err)}`);
      process.exit(1);
    },
  );
