/**
 * One TCP port for HTTP/1.1 and HTTP/2. Without TLS (createDualServer) there is no ALPN, so
 * the first bytes decide: a connection that starts with the HTTP/2 preface goes to the
 * HTTP/2 server (h2c with prior knowledge), anything else to the HTTP/1.1 server (whose
 * parser answers garbage with 400 and closes). Never reads more than the 24 preface bytes.
 * With TLS (createTlsServer), ALPN decides.
 */
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { listenOn } from "./listen.ts";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface DualServer {
  readonly tcp: net.Server;
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  /** Listens; resolves with the bound address. */
  listen(host: string, port: number): Promise<net.AddressInfo>;
  /** Stops accepting, ends idle connections, and destroys the rest after `graceMs`. */
  close(graceMs?: number): Promise<void>;
}

/** How long a connection may take to send its first bytes before it is dropped. */
const FIRST_BYTES_TIMEOUT_MS = 10_000;

/** PEM certificate (chain) and key: the server speaks TLS, HTTP/2 or HTTP/1.1 by ALPN. */
export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/**
 * With TLS: HTTP/2 and HTTP/1.1 on one port, chosen by ALPN (gRPC clients ask for h2;
 * curl and browsers get either). `reloadTls` swaps the certificate for new connections.
 */
export function createTlsServer(
  handler: RequestHandler,
  files: TlsFiles,
): DualServer & { reloadTls(files: TlsFiles): void } {
  const h2 = http2.createSecureServer(
    { cert: files.cert, key: files.key, allowHTTP1: true, minVersion: "TLSv1.2" },
    handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  h2.on("sessionError", () => undefined);
  h2.on("tlsClientError", () => undefined); // a failed handshake is the client's problem
  h2.setTimeout(0);
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return {
    tcp: h2 as unknown as net.Server,
    h1: h2 as unknown as http.Server,
    h2: h2 as unknown as http2.Http2Server,
    listen: (host, port) => listenOn(h2, host, port),
    close: (graceMs = 5000) => closeGracefully(h2, sockets, sessions, graceMs),
    reloadTls(f) {
      h2.setSecureContext({ cert: f.cert, key: f.key });
    },
  };
}

export function createDualServer(handler: RequestHandler): DualServer {
  const h1 = http.createServer(handler as http.RequestListener);
  // Long-lived SSE responses must not be cut by the default request timeout.
  h1.requestTimeout = 0;
  h1.headersTimeout = 30_000;
  const h2 = http2.createServer(
    {},
    handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  h2.on("sessionError", () => undefined); // a broken peer session must not crash the server
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });

  const tcp = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.setTimeout(FIRST_BYTES_TIMEOUT_MS, () => socket.destroy());
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const n = Math.min(buf.length, PREFACE.length);
      const isH2Prefix = buf.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (isH2Prefix && buf.length < PREFACE.length) return; // need more bytes to decide
      socket.off("data", onData);
      socket.pause();
      socket.setTimeout(0);
      socket.unshift(buf);
      if (isH2Prefix) {
        // The HTTP/2 session drains the readable buffer itself and then reads from the
        // native handle: resuming the JS stream here would steal its bytes.
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
  });

  return {
    tcp,
    h1,
    h2,
    listen: (host, port) => listenOn(tcp, host, port),
    close(graceMs = 5000) {
      h1.closeIdleConnections();
      return closeGracefully(tcp, sockets, sessions, graceMs);
    },
  };
}

/**
 * Stops accepting; asks HTTP/2 peers to go away politely (GOAWAY: open streams may finish);
 * destroys whatever is still connected after `graceMs`.
 */
async function closeGracefully(
  server: net.Server,
  sockets: ReadonlySet<net.Socket>,
  sessions: ReadonlySet<http2.ServerHttp2Session>,
  graceMs: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const timer = setTimeout(() => {
    for (const s of sockets) s.destroy();
  }, graceMs);
  timer.unref();
  for (const session of sessions) session.close();
  await closed;
  clearTimeout(timer);
}
