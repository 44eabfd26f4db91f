/**
 * TLS interception for the hosts that have credentials in the policy (issue #16): after the
 * egress proxy answered a CONNECT and read the ClientHello, this ends TLS toward the
 * sandbox with a leaf from the run's CA, serves HTTP/1.1 on it, and forwards each request
 * over a fully verified TLS connection to the address the proxy checked, with the
 * credential headers set by us. Responses come back with every covered form of a
 * credential value (kernel/redaction.ts) masked, headers and streamed bodies alike (a body
 * compressed against our accept-encoding is decoded first, one in an unknown coding is
 * refused), so an upstream that echoes a header cannot hand the secret to the sandbox.
 *
 * Must never: send a request whose Host is not the CONNECT host, let the client's own value
 * of a credential header through, connect upstream without verifying its certificate for
 * the host, put a credential value into a response, a message or a record, or throw (it
 * resolves when the client's connection ends, with the byte counts).
 */
import type http from "node:http";
import https from "node:https";
import type net from "node:net";
import { Duplex, type Readable, type Transform } from "node:stream";
import type tls from "node:tls";
import zlib from "node:zlib";
import {
  createRedactor,
  createStreamRedactor,
  MIN_SECRET_LENGTH,
  type Redactor,
} from "../kernel/redaction.ts";
import type { RunCa } from "./run-ca.ts";

export interface InterceptOptions {
  /** The CONNECT host (lower case); the ClientHello's server name already equals it. */
  host: string;
  port: number;
  /** The address the proxy checked for `host`: the only one connected to. */
  address: string;
  ca: RunCa;
  /** Credential headers to set on every request (resolved values), e.g. authorization. */
  headers: Record<string, string>;
  /** Roots the upstream's certificate must chain to; default: Node's default roots. */
  upstreamCa?: string | string[];
  /**
   * Bytes each way on the client's connection (TLS records, as the proxy counts a tunnel):
   * a chunk that would go past it ends the connection instead.
   */
  maxBytes: number;
  /** Quiet time after which a connection (or an upstream that stopped answering) is ended. */
  idleTimeoutMs: number;
  /** Time for a TLS handshake, the client's or the upstream's (TCP connect included). */
  connectTimeoutMs: number;
  /**
   * The run's byte budget: every byte each way is offered; false ends the connection. And
   * its connection budget: each request is offered; false answers it 429.
   */
  spend?: (bytes: number) => boolean;
  admitRequest?: () => boolean;
  /** Each request once it is done (answered, refused, failed or cut). */
  onRequest?: (r: InterceptedRequest) => void;
}

export interface InterceptedRequest {
  method: string;
  /** The request target as the client sent it (an absolute-form target: its path and query). */
  path: string;
  /** The status the client got; 0 when the connection ended before one was sent. */
  status: number;
  /** Request body bytes read from the client. */
  bytesUp: number;
  /**
   * Response body bytes passed on toward the client (after masking); when maxBytes cut the
   * connection, not all of them reached it.
   */
  bytesDown: number;
}

export interface InterceptResult {
  /** Bytes read from the client's connection, the ClientHello included. */
  bytesUp: number;
  /** Bytes written to the client's connection. */
  bytesDown: number;
  requests: number;
}

/** Hop-by-hop headers (RFC 9110 7.6.1) and ones a forwarded request must not carry. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "http2-settings",
]);

interface Context {
  opts: InterceptOptions;
  agent: https.Agent;
  redactor: Redactor;
  /** Upstream requests in progress, ended when the client goes. */
  outgoing: Set<http.ClientRequest>;
}

/**
 * Serves the client's TLS connection for `opts.host` until it ends. `first` is what the
 * proxy already read from `client` (the ClientHello); `client` should be paused.
 */
export async function intercept(
  client: net.Socket,
  first: Buffer,
  opts: InterceptOptions,
): Promise<InterceptResult> {
  const counts: InterceptResult = { bytesUp: 0, bytesDown: 0, requests: 0 };
  client.on("error", () => undefined);
  let leaf: { certPem: string; keyPem: string };
  try {
    leaf = await opts.ca.leafFor(opts.host);
  } catch {
    client.destroy();
    return counts;
  }
  if (client.destroyed) return counts;
  return new Promise((resolve) => {
    try {
      serveConnection(client, first, leaf, opts, counts, resolve);
    } catch {
      client.destroy(); // e.g. a leaf the TLS stack refuses: nothing can be served
      resolve(counts);
    }
  });
}

/** Serves TLS and HTTP/1.1 on `client`; calls `done` once it closed and no request is left. */
function serveConnection(
  client: net.Socket,
  first: Buffer,
  leaf: { certPem: string; keyPem: string },
  opts: InterceptOptions,
  counts: InterceptResult,
  done: (r: InterceptResult) => void,
): void {
  const ctx: Context = {
    opts,
    // Kept alive: a client's requests reuse one verified upstream connection. Verification
    // is asked for explicitly so NODE_TLS_REJECT_UNAUTHORIZED cannot turn it off.
    agent: new https.Agent({
      keepAlive: true,
      ca: opts.upstreamCa,
      servername: opts.host,
      rejectUnauthorized: true,
    }),
    redactor: secretRedactor(Object.values(opts.headers)),
    outgoing: new Set(),
  };
  let inFlight = 0;
  let closed = false;
  let settled = false;
  const finish = (): void => {
    if (settled || !closed || inFlight > 0) return;
    settled = true;
    ctx.agent.destroy();
    done(counts);
  };
  const server = https.createServer(
    {
      cert: leaf.certPem,
      key: leaf.keyPem,
      ALPNProtocols: ["http/1.1"],
      handshakeTimeout: opts.connectTimeoutMs,
      keepAliveTimeout: opts.idleTimeoutMs,
      requestTimeout: 0, // the idle timeouts bound a request instead
    },
    (req, res) => {
      inFlight++;
      counts.requests++;
      void serve(req, res, ctx).finally(() => {
        inFlight--;
        finish();
      });
    },
  );
  server.on("tlsClientError", () => client.destroy());
  const raw = clientStream(client, first, counts, opts.maxBytes, opts.spend ?? (() => true));
  // Idle: nothing from or to the client while no request waits on the upstream (which
  // has its own idle timeout and answers 504).
  client.setTimeout(opts.idleTimeoutMs, () => {
    if (inFlight === 0) client.destroy();
  });
  client.once("close", () => {
    closed = true;
    raw.destroy();
    for (const out of ctx.outgoing) out.destroy();
    finish();
  });
  server.emit("connection", raw);
}

/**
 * The client's socket as a stream that first gives `first` (TLS reads through it), counting
 * the bytes passed each way; a chunk that would take either count past `maxBytes` is not
 * passed on and ends the connection.
 */
function clientStream(
  client: net.Socket,
  first: Buffer,
  counts: InterceptResult,
  maxBytes: number,
  spend: (bytes: number) => boolean,
): Duplex {
  const raw = new Duplex({
    read() {
      client.resume();
    },
    write(chunk: Buffer, _encoding, done) {
      if (counts.bytesDown + chunk.length > maxBytes || !spend(chunk.length)) client.destroy();
      // Fails the stream at once, so the TLS layer and the response above it stop too.
      if (client.destroyed) return done(new Error("the client connection is closed"));
      counts.bytesDown += chunk.length;
      if (client.write(chunk)) done();
      else client.once("drain", () => done());
    },
    final(done) {
      client.end();
      done();
    },
    destroy(err, done) {
      client.destroy();
      done(err);
    },
  });
  const take = (b: Buffer): void => {
    if (client.destroyed) return;
    if (counts.bytesUp + b.length > maxBytes || !spend(b.length)) {
      client.destroy();
      return;
    }
    counts.bytesUp += b.length;
    if (!raw.push(b)) client.pause();
  };
  raw.on("error", () => undefined);
  if (first.length > 0) take(first);
  client.on("data", take);
  client.on("end", () => raw.push(null));
  return raw;
}

/** One request: refused when its Host is not the CONNECT host, else forwarded. */
async function serve(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: Context,
): Promise<void> {
  const record: InterceptedRequest = {
    method: req.method ?? "GET",
    path: req.url ?? "",
    status: 0,
    bytesUp: 0,
    bytesDown: 0,
  };
  try {
    if (ctx.opts.admitRequest?.() === false) {
      answer(res, record, 429, "egress: this run has used its connections (network.limits)");
      return;
    }
    const framing = framingNamed(req.headers.connection, ctx.opts.headers);
    if (framing !== undefined) {
      answer(res, record, 400, `egress: Connection may not name the end-to-end header ${framing}`);
      return;
    }
    const target = requestPath(req, ctx.opts.host, ctx.opts.port);
    if ("refuse" in target) {
      answer(res, record, target.status, target.refuse);
      return;
    }
    record.path = target.path;
    await forward(req, res, ctx, record);
  } catch (err) {
    if (!res.headersSent) answer(res, record, 502, `egress: ${describe(err, ctx.redactor)}`);
    else res.destroy();
  } finally {
    try {
      ctx.opts.onRequest?.(record);
    } catch {
      // a failing observer must not take the connection down
    }
  }
}

/** The origin-form path to send, or why the request is refused. */
function requestPath(
  req: http.IncomingMessage,
  host: string,
  port: number,
): { path: string } | { refuse: string; status: number } {
  const allowed = new Set([host, `${host}:${port}`]);
  const named = (req.headers.host ?? "").toLowerCase();
  if (!allowed.has(named)) {
    return {
      status: 421,
      refuse: `this connection is for ${host}:${port}; the request's Host is ${named === "" ? "missing" : JSON.stringify(named)}`,
    };
  }
  const url = req.url ?? "";
  if (url.startsWith("/") || url === "*") return { path: url };
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { status: 400, refuse: "the request target must be a path or an https:// URL" };
  }
  if (target.protocol !== "https:" || !allowed.has(target.host.toLowerCase()))
    return { status: 421, refuse: `this connection is for https://${host}:${port} only` };
  return { path: `${target.pathname}${target.search}` };
}

/** Sends the request upstream and relays the answer; resolves when the response is done. */
function forward(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: Context,
  record: InterceptedRequest,
): Promise<void> {
  const { opts } = ctx;
  return new Promise((resolve) => {
    res.once("close", () => resolve());
    const out = https.request({
      host: opts.address,
      port: opts.port,
      servername: opts.host,
      method: record.method,
      path: record.path,
      headers: upstreamHeaders(req.headers, opts.headers),
      agent: ctx.agent,
      timeout: opts.connectTimeoutMs,
    });
    ctx.outgoing.add(out);
    let connected = false;
    let timedOut = false;
    out.on("socket", (socket: net.Socket) => {
      const ready = (): void => {
        connected = true;
        out.setTimeout(opts.idleTimeoutMs);
      };
      // A kept-alive socket was verified already; a new one is once its handshake is done.
      if ((socket as tls.TLSSocket).authorized) ready();
      else socket.once("secureConnect", ready);
    });
    out.on("timeout", () => {
      timedOut = true;
      out.destroy();
    });
    out.on("error", (err) => {
      if (res.headersSent) return void res.destroy();
      const where = `${opts.host}:${opts.port}`;
      if (!timedOut)
        return answer(res, record, 502, `egress: ${where} failed: ${describe(err, ctx.redactor)}`);
      const why = connected
        ? `did not answer within ${opts.idleTimeoutMs} ms`
        : `could not be reached within ${opts.connectTimeoutMs} ms`;
      answer(res, record, 504, `egress: ${where} ${why}`);
    });
    out.on("response", (up) => relay(up, res, ctx, record));
    out.on("close", () => ctx.outgoing.delete(out));
    res.once("close", () => {
      if (!res.writableFinished) out.destroy();
    });
    req.on("data", (b: Buffer) => {
      record.bytesUp += b.length;
    });
    req.pipe(out);
  });
}

/** Relays an upstream response with every credential form masked in its headers and body. */
function relay(
  up: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: Context,
  record: InterceptedRequest,
): void {
  const bodyless = up.statusCode === 204 || up.statusCode === 304 || record.method === "HEAD";
  const body = bodyless ? up : decoded(up);
  if (body === undefined) {
    up.destroy();
    const coding = String(up.headers["content-encoding"]).replace(/[^\x20-\x7e]/g, " ");
    const why = `sent a content encoding that cannot be checked for credentials: ${coding}`;
    answer(res, record, 502, `egress: ${ctx.opts.host}:${ctx.opts.port} ${why}`);
    return;
  }
  try {
    res.writeHead(
      up.statusCode ?? 502,
      ctx.redactor.text(up.statusMessage ?? ""),
      responseHeaders(up.headers, ctx.redactor, bodyless),
    );
  } catch {
    up.destroy(); // a status or header Node will not send: end the connection
    res.destroy();
    return;
  }
  record.status = up.statusCode ?? 502;
  const masked = createStreamRedactor(ctx.redactor, 0);
  const send = (text: string): void => {
    if (text === "") return;
    const b = Buffer.from(text, "latin1");
    record.bytesDown += b.length;
    if (!res.write(b)) {
      body.pause();
      res.once("drain", () => body.resume());
    }
  };
  // Bytes are read as latin1 (one character per byte) so masking keeps every other byte;
  // `flush` after each chunk holds back only a tail that could still be a form of a value.
  body.on("data", (b: Buffer) => send(masked.push(b.toString("latin1")) + masked.flush()));
  body.on("end", () => {
    send(masked.end());
    res.end();
  });
  body.on("error", () => res.destroy());
  up.on("error", () => res.destroy());
  up.on("close", () => {
    if (!up.complete) res.destroy();
  });
}

/**
 * The body as sent, decoded when the upstream compressed it anyway (accept-encoding was
 * identity): a compressed body could carry a credential masking cannot see. Undefined for
 * a coding that cannot be decoded here.
 */
function decoded(up: http.IncomingMessage): Readable | undefined {
  const coding = (up.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  const decoder = DECODERS[coding];
  if (decoder === undefined) return undefined;
  if (decoder === null) return up;
  const d = decoder();
  up.pipe(d);
  return d;
}

const DECODERS: Record<string, (() => Transform) | null> = {
  "": null,
  identity: null,
  gzip: () => zlib.createGunzip(),
  "x-gzip": () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
  zstd: () => zlib.createZstdDecompress(),
};

/** The client's headers less hop-by-hop ones and its own credential values, plus ours. */
function upstreamHeaders(
  incoming: http.IncomingHttpHeaders,
  credentials: Record<string, string>,
): http.OutgoingHttpHeaders {
  const drop = dropped(incoming.connection);
  for (const name of Object.keys(credentials)) drop.add(name.toLowerCase());
  drop.add("accept-encoding");
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value !== undefined && !drop.has(name)) out[name] = value;
  }
  for (const [name, value] of Object.entries(credentials)) out[name.toLowerCase()] = value;
  // A chunked body stays chunked (Node frames it again): without a length, some methods
  // would otherwise be sent with no framing at all.
  if (incoming["transfer-encoding"] !== undefined) out["transfer-encoding"] = "chunked";
  // Bodies are masked as they stream: asked for uncompressed (one compressed anyway is decoded).
  out["accept-encoding"] = "identity";
  return out;
}

/**
 * The upstream's headers less hop-by-hop ones, and for a body its length (masking can change
 * it) and content encoding (it is decoded).
 */
function responseHeaders(
  incoming: http.IncomingHttpHeaders,
  redactor: Redactor,
  bodyless: boolean,
): http.OutgoingHttpHeaders {
  const drop = dropped(incoming.connection);
  if (!bodyless) {
    drop.add("content-length");
    drop.add("content-encoding"); // the body goes on decoded
  }
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || drop.has(name)) continue;
    out[name] = Array.isArray(value) ? value.map((v) => redactor.text(v)) : redactor.text(value);
  }
  return out;
}

/**
 * Headers a Connection header may never remove: the message's framing and target, whose
 * loss would let a body become a request of its own on the credentialed upstream socket.
 */
const END_TO_END = new Set(["content-length", "transfer-encoding", "host"]);

/** The framing or credential header a request's Connection names, if any (refused: 400). */
function framingNamed(
  connection: string | undefined,
  credentials: Record<string, string>,
): string | undefined {
  const creds = new Set(Object.keys(credentials).map((n) => n.toLowerCase()));
  for (const n of (connection ?? "").split(",")) {
    const name = n.trim().toLowerCase();
    if (END_TO_END.has(name) || creds.has(name)) return name;
  }
  return undefined;
}

/** Hop-by-hop names, and the ones a Connection header lists (never the framing ones). */
function dropped(connection: string | undefined): Set<string> {
  const names = new Set(HOP_BY_HOP);
  for (const n of (connection ?? "").split(",")) {
    const name = n.trim().toLowerCase();
    if (!END_TO_END.has(name)) names.add(name);
  }
  return names;
}

/** A plain-text answer made here (refusal or failure); the record takes its status. */
function answer(
  res: http.ServerResponse,
  record: InterceptedRequest,
  status: number,
  message: string,
): void {
  record.status = status;
  if (res.destroyed) return;
  const body = Buffer.from(`${message}\n`);
  record.bytesDown = body.length;
  res
    .writeHead(status, {
      "content-type": "text/plain; charset=utf-8",
      "content-length": body.length,
      "x-agentd-egress": message.replace(/[^\x20-\x7e]/g, " "),
    })
    .end(body);
}

/** A short reason for `err`, masked (a message could quote a header). */
function describe(err: unknown, redactor: Redactor): string {
  const e = err as NodeJS.ErrnoException;
  const text = e?.code !== undefined ? `${e.code}: ${e.message}` : String(e?.message ?? err);
  return redactor.text(text.replace(/[\r\n]+/g, " "));
}

/**
 * A redactor for the credential values: each value, the credentials after an auth scheme
 * ("Bearer <token>": the token alone), and for Basic the decoded "user:password" and the
 * password; each also as its UTF-8 bytes read as latin1 (how bodies and headers are read).
 */
function secretRedactor(values: readonly string[]): Redactor {
  const secrets = new Set<string>();
  const add = (v: string): void => {
    if (v.length < MIN_SECRET_LENGTH) return;
    secrets.add(v);
    secrets.add(Buffer.from(v, "utf8").toString("latin1"));
  };
  for (const value of values) {
    add(value);
    const m = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)\s+(\S.*)$/s.exec(value);
    if (m === null) continue;
    const credentials = (m[2] as string).trim();
    add(credentials);
    if ((m[1] as string).toLowerCase() !== "basic") continue;
    const decoded = Buffer.from(credentials, "base64").toString("utf8");
    if (
      Buffer.from(decoded).toString("base64").replace(/=+$/, "") !== credentials.replace(/=+$/, "")
    )
      continue; // not base64 after all
    add(decoded);
    const colon = decoded.indexOf(":");
    if (colon >= 0) add(decoded.slice(colon + 1));
  }
  const list = [...secrets];
  return createRedactor({ secrets: () => list });
}
