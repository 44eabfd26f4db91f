/**
 * The egress proxy of a run's sandbox (issue #16): forward HTTP and CONNECT. It resolves
 * names itself and connects to the address it checked (no second lookup a rebinding DNS
 * could change), allows only what its admission says (the run's policy, approvals) and
 * `checkDestination` allows, and for a CONNECT tunnel requires the TLS ClientHello's
 * server name to be the host the tunnel was opened to. Every connection is reported
 * (host, port, method, decision, bytes each way, duration, how TLS was carried);
 * connections at once and in all, bytes per connection and in all, and idle time are
 * bounded. Must never: connect before the check, or carry a tunnel whose first bytes are
 * not TLS for its host.
 */
import dns from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import { listenOn } from "../server/listen.ts";
import { checkDestination, type DestinationCheck } from "./destination.ts";
import { MAX_HELLO_BYTES, readSni } from "./sni.ts";

export interface ConnectionRecord {
  host: string;
  port: number;
  /** "CONNECT" for a tunnel, else the HTTP method. */
  method: string;
  allowed: boolean;
  /** "allowed", "approved", "denied" or "pending" (see Admission). */
  decision: string;
  reason: string;
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  /** "tunnel", "intercepted" or "plain"; "" when refused before any byte went through. */
  tls: string;
  /** The admission's tag (e.g. the call that was running when the connection came). */
  tag?: string;
}

/**
 * Whether a connection to host:port may be tried at all, and under which check: allowed
 * by the policy, approved by a person, or refused (denied, or pending a person's answer).
 */
export type Admission = (
  | { check: DestinationCheck; decision: "allowed" | "approved" | "trusted" }
  | { reason: string; decision: "denied" | "pending" }
) & { tag?: string };

/** Carries an admitted, SNI-checked tunnel itself (TLS terminated at the proxy). */
export type Interceptor = (
  client: net.Socket,
  first: Buffer,
  address: string,
  /** The run's budgets: bytes each way, and one connection per request carried. */
  budget: { spend(bytes: number): boolean; count(): boolean },
) => Promise<{ bytesUp: number; bytesDown: number }>;

export interface EgressProxyOptions {
  /** A fixed check (every connection "allowed" by it)… */
  check?: DestinationCheck;
  /** …or one decided per connection (wins over `check`). */
  admit?: (host: string, port: number) => Admission;
  /** Every address of a name; default: the system resolver (dns.lookup, all). */
  resolve?: (host: string) => Promise<string[]>;
  /** Connections at once. */
  maxConnections?: number;
  /** Connections in all, over the proxy's life (past it, every new one is refused). */
  maxTotalConnections?: number;
  /** Bytes each way per connection. */
  maxBytes?: number;
  /** Bytes in all (both ways, every connection): past it, connections are cut and refused. */
  maxTotalBytes?: number;
  connectTimeoutMs?: number;
  idleTimeoutMs?: number;
  onConnection?: (r: ConnectionRecord) => void;
  /**
   * Each connection's outcome once judged (admission, then the destination check on the
   * addresses the name resolved to): for shadow mode. Never changes the outcome.
   */
  onDecided?: (d: DecidedConnection) => void;
  /** For a host whose tunnels must be intercepted (credentials), the interceptor. */
  intercept?: (host: string, port: number) => Interceptor | undefined;
}

/** A connection as judged: the admission's decision ("denied" when the check refused it). */
export interface DecidedConnection {
  host: string;
  port: number;
  tag: string;
  decision: Admission["decision"];
  reason?: string;
  /** What the name resolved to. */
  addresses: readonly string[];
  /** Whether the name was resolved (false: refused by the admission before). */
  resolved: boolean;
}

export interface EgressProxy {
  listen(host: string, port: number): Promise<net.AddressInfo>;
  close(): Promise<void>;
}

const systemResolve = async (host: string): Promise<string[]> =>
  (await dns.lookup(host, { all: true })).map((a) => a.address);

export function createEgressProxy(opts: EgressProxyOptions): EgressProxy {
  const resolve = opts.resolve ?? systemResolve;
  const maxConnections = opts.maxConnections ?? 64;
  const maxBytes = opts.maxBytes ?? 1024 ** 3;
  const maxTotal = opts.maxTotalConnections ?? Number.POSITIVE_INFINITY;
  const maxTotalBytes = opts.maxTotalBytes ?? Number.POSITIVE_INFINITY;
  let total = 0;
  let totalBytes = 0;
  const admit =
    opts.admit ?? ((): Admission => ({ check: opts.check ?? { rules: [] }, decision: "allowed" }));
  const connectTimeout = opts.connectTimeoutMs ?? 10_000;
  const idleTimeout = opts.idleTimeoutMs ?? 60_000;
  let open = 0;
  const sockets = new Set<net.Socket>();

  /**
   * Checks host:port and gives the address to connect to, or the reason it is refused
   * (and the admission's decision either way).
   */
  async function decide(
    host: string,
    port: number,
  ): Promise<
    | { address: string; decision: string; tag?: string }
    | { reason: string; decision: string; tag?: string }
  > {
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      return { reason: "a bad port", decision: "denied" };
    if (total > maxTotal)
      return { reason: `more than ${maxTotal} connections in this run`, decision: "denied" };
    if (totalBytes >= maxTotalBytes)
      return { reason: `more than ${maxTotalBytes} bytes in this run`, decision: "denied" };
    const a = admit(host, port);
    const tag = a.tag === undefined ? {} : { tag: a.tag };
    const decided = (d: { decision: Admission["decision"]; reason?: string }, at?: string[]) => {
      try {
        opts.onDecided?.({
          host,
          port,
          tag: a.tag ?? "",
          ...d,
          addresses: at ?? [],
          resolved: at !== undefined,
        });
      } catch {
        // shadow mode never affects a connection
      }
    };
    if ("reason" in a) {
      decided({ decision: a.decision, reason: a.reason });
      return { reason: a.reason, decision: a.decision, ...tag };
    }
    let addresses: string[];
    try {
      addresses = net.isIP(host) !== 0 ? [host] : await resolve(host);
    } catch {
      addresses = [];
    }
    const v = checkDestination(a.check, host, port, addresses);
    decided(v.ok ? { decision: a.decision } : { decision: "denied", reason: v.reason }, addresses);
    return v.ok
      ? { address: addresses[0] as string, decision: a.decision, ...tag }
      : { reason: v.reason, decision: "denied", ...tag };
  }

  /** Counts bytes against the run's total; false once it is spent. */
  const spend = (n: number): boolean => {
    totalBytes += n;
    return totalBytes <= maxTotalBytes;
  };
  /** Counts one connection or request, refused ones included; false past the run's total. */
  const count = (): boolean => ++total <= maxTotal;

  function report(r: Omit<ConnectionRecord, "durationMs">, t0: number): void {
    opts.onConnection?.({ ...r, durationMs: Math.round(performance.now() - t0) });
  }

  // Nothing a connection does may escape as an unhandled rejection: the proxy lives in
  // the worker's process, and a sandbox must not be able to take it down.
  const server = http.createServer((req, res) => {
    forward(req, res).catch(() => res.destroy());
  });
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    tunnel(req, client, head).catch(() => client.destroy());
  });
  const tunnelHosts = new WeakMap<net.Socket, { host: string; port: number }>();
  const plainInTunnel = http.createServer((req, res) => {
    const t = tunnelHosts.get(req.socket);
    const asked = (req.headers.host ?? "").toLowerCase();
    if (t === undefined || (asked !== t.host && asked !== `${t.host}:${t.port}`)) {
      res
        .writeHead(421, { "content-type": "text/plain" })
        .end(`a tunnel to ${t?.host}:${t?.port} carries requests for that host only\n`);
      return;
    }
    req.url = `http://${t.host}:${t.port}${req.url?.startsWith("/") ? req.url : "/"}`;
    forward(req, res).catch(() => res.destroy());
  });
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  // Sockets, not only requests, are bounded: a sandbox opening thousands of connections
  // that never send a byte would otherwise spend the worker's file descriptors. Past the
  // cap new ones are closed at once; a silent one goes at the connect timeout.
  server.maxConnections = maxConnections * 4 + 32;
  server.headersTimeout = connectTimeout;
  server.requestTimeout = 0; // a long upload or download is bounded by bytes and idle time

  async function tunnel(
    req: http.IncomingMessage,
    client: net.Socket,
    head: Buffer,
  ): Promise<void> {
    const t0 = performance.now();
    client.on("error", () => undefined);
    const m = /^([a-zA-Z0-9.-]{1,253}|\[[0-9a-fA-F:.]+\]):(\d{1,5})$/.exec(req.url ?? "");
    const host = (m?.[1] ?? "").replace(/^\[|\]$/g, "").toLowerCase();
    const port = Number(m?.[2]);
    const refuse = (status: string, reason: string, decision = "denied", tag?: string): void => {
      // Closed once written: a refused socket is never kept (half-open sockets would pile up).
      client.write(
        `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nx-agentd-egress: ${headerSafe(reason)}\r\n\r\n${reason}\n`,
      );
      client.destroySoon();
      const r = { host, port, method: "CONNECT", allowed: false, decision, reason };
      report(
        { ...r, bytesUp: 0, bytesDown: 0, tls: "", ...(tag === undefined ? {} : { tag }) },
        t0,
      );
    };
    count();
    if (m === null) return refuse("400 Bad Request", "CONNECT needs HOST:PORT");
    if (open >= maxConnections)
      return refuse("429 Too Many Requests", `more than ${maxConnections} connections at once`);
    open++;
    try {
      const d = await decide(host, port);
      if ("reason" in d) return refuse("403 Forbidden", d.reason, d.decision, d.tag);
      const tag = d.tag === undefined ? {} : { tag: d.tag };
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      const hello = await firstBytes(client, head);
      const sni = readSni(hello);
      if (sni.kind === "not-tls" && HTTP_REQUEST.test(hello.toString("latin1", 0, 16))) {
        // Plain HTTP in a tunnel (Node's fetch tunnels http:// URLs too): served request
        // by request like a forward request, each to this tunnel's host only.
        tunnelHosts.set(client, { host, port });
        // Held (and counted as open) until it closes; quiet for the idle time, it is closed.
        open++;
        client.once("close", () => open--);
        client.setTimeout(idleTimeout, () => client.destroy());
        client.unshift(hello);
        plainInTunnel.emit("connection", client);
        client.resume(); // paused while the first bytes were read
        return;
      }
      if (sni.kind !== "sni" || sni.name !== host) {
        const why =
          sni.kind === "sni"
            ? `the TLS server name ${sni.name} is not ${host}`
            : `not TLS for ${host} (${sni.kind === "not-tls" ? sni.reason : "cut short"})`;
        client.destroy();
        const r = { host, port, method: "CONNECT", allowed: false, decision: "denied" };
        report({ ...r, reason: why, bytesUp: 0, bytesDown: 0, tls: "", ...tag }, t0);
        return;
      }
      const ic = opts.intercept?.(host, port);
      const counts =
        ic === undefined
          ? await splice(client, d.address, port, hello)
          : await ic(client, hello, d.address, { spend, count });
      const r = { host, port, method: "CONNECT", allowed: true, decision: d.decision };
      const tls = ic === undefined ? "tunnel" : "intercepted";
      report({ ...r, reason: d.decision, ...counts, tls, ...tag }, t0);
    } finally {
      open--;
    }
  }

  /** The first bytes of a tunnel (the ClientHello), within the connect timeout. */
  function firstBytes(client: net.Socket, head: Buffer): Promise<Buffer> {
    return new Promise((resolve) => {
      let buf = head;
      const done = (): void => {
        clearTimeout(timer);
        client.off("data", onData);
        client.pause();
        resolve(buf);
      };
      const onData = (chunk: Buffer): void => {
        buf = Buffer.concat([buf, chunk]);
        if (readSni(buf).kind !== "need-more" || buf.length >= MAX_HELLO_BYTES) done();
      };
      const timer = setTimeout(done, connectTimeout);
      if (readSni(buf).kind !== "need-more") return done();
      client.on("data", onData);
      client.resume();
    });
  }

  /** Connects to the checked address and copies both ways, bounded; resolves with the byte counts. */
  function splice(
    client: net.Socket,
    address: string,
    port: number,
    first: Buffer,
  ): Promise<{ bytesUp: number; bytesDown: number }> {
    return new Promise((resolve) => {
      let up = first.length;
      let down = 0;
      const upstream = net.connect({ host: address, port, noDelay: true });
      upstream.setTimeout(connectTimeout);
      let settled = false;
      const finish = (): void => {
        if (settled) return;
        settled = true;
        client.destroy();
        upstream.destroy();
        resolve({ bytesUp: up, bytesDown: down });
      };
      upstream.once("connect", () => {
        upstream.setTimeout(idleTimeout);
        client.setTimeout(idleTimeout);
        upstream.write(first);
        // Counted here, copied by pipe: backpressure both ways (a client that stops
        // reading holds the upstream, not the worker's memory), and each side's end (FIN)
        // passed on after the bytes before it.
        client.on("data", (b: Buffer) => {
          up += b.length;
          if (up > maxBytes || !spend(b.length)) finish();
        });
        upstream.on("data", (b: Buffer) => {
          down += b.length;
          if (down > maxBytes || !spend(b.length)) finish();
        });
        client.pipe(upstream);
        upstream.pipe(client);
      });
      let closed = 0;
      for (const [s, other] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        s.on("timeout", finish);
        s.on("error", finish);
        // One side closed: end the other once its pending bytes are out; done when both are.
        s.on("close", () => {
          other.end();
          if (++closed === 2) finish();
        });
      }
    });
  }

  async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const t0 = performance.now();
    let url: URL;
    try {
      url = new URL(req.url ?? "");
      if (url.protocol !== "http:") throw new Error("scheme");
    } catch {
      res
        .writeHead(400, { "content-type": "text/plain" })
        .end(
          "a forward proxy request needs an absolute http:// URL (https goes through CONNECT)\n",
        );
      return;
    }
    const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
    const port = Number(url.port || 80);
    const method = req.method ?? "GET";
    const deny = (status: number, reason: string, decision = "denied", tag?: string): void => {
      res
        .writeHead(status, {
          "content-type": "text/plain",
          "x-agentd-egress": headerSafe(reason),
        })
        .end(`${reason}\n`);
      const r = { host, port, method, allowed: false, decision, reason };
      report(
        { ...r, bytesUp: 0, bytesDown: 0, tls: "", ...(tag === undefined ? {} : { tag }) },
        t0,
      );
    };
    count();
    if (open >= maxConnections) return deny(429, `more than ${maxConnections} connections at once`);
    open++;
    try {
      const d = await decide(host, port);
      if ("reason" in d) return deny(403, d.reason, d.decision, d.tag);
      const headers = { ...req.headers };
      for (const h of HOP_HEADERS) delete headers[h];
      // The upstream routes by Host: it is the checked URL's, never the sandbox's own
      // (RFC 9112 3.2.2), or an allowed name would front for any site behind the same server.
      headers.host = url.host;
      let up = 0;
      let down = 0;
      await new Promise<void>((resolve) => {
        const out = http.request(
          {
            host: d.address,
            port,
            method,
            path: `${url.pathname}${url.search}`,
            headers,
            timeout: idleTimeout,
          },
          (upstream) => {
            const status = upstream.statusCode ?? 0;
            try {
              // A hostile upstream's status (099, 000) or header must not throw out of here.
              if (status < 100 || status > 599) throw new Error(`status ${status}`);
              res.writeHead(status, upstream.headers);
            } catch {
              upstream.destroy();
              res.destroy();
              return resolve();
            }
            upstream.on("data", (b: Buffer) => {
              down += b.length;
              if (down > maxBytes || !spend(b.length)) upstream.destroy();
            });
            upstream.pipe(res);
            upstream.on("end", resolve);
            upstream.on("error", resolve);
            upstream.on("close", resolve);
          },
        );
        out.on("timeout", () => out.destroy(new Error("timed out")));
        // Whatever happens (a 101 gets no 'response'), the request ends with its socket.
        out.on("close", () => {
          if (!res.headersSent) res.destroy();
          resolve();
        });
        // The client gone before the response's end: stop the upstream's transfer too.
        res.on("close", () => {
          if (!res.writableFinished) out.destroy();
        });
        out.on("error", () => {
          if (!res.headersSent)
            res
              .writeHead(502, { "content-type": "text/plain" })
              .end("the upstream failed or did not answer\n");
          else res.destroy();
          resolve();
        });
        req.on("data", (b: Buffer) => {
          up += b.length;
          if (up > maxBytes || !spend(b.length)) out.destroy(new Error("too many bytes"));
        });
        req.pipe(out);
      });
      const r = { host, port, method, allowed: true, decision: d.decision, reason: d.decision };
      const tag = d.tag === undefined ? {} : { tag: d.tag };
      report({ ...r, bytesUp: up, bytesDown: down, tls: "plain", ...tag }, t0);
    } finally {
      open--;
    }
  }

  return {
    listen: (host, port) => listenOn(server, host, port),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        plainInTunnel.close();
        server.close(() => resolve());
      }),
  };
}

/** Request headers a forward request never passes on (hop by hop; no upgrades). */
const HOP_HEADERS = [
  "proxy-authorization",
  "proxy-connection",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
];

/** The start of an HTTP/1 request line ("GET /", "POST /"…). */
const HTTP_REQUEST = /^[A-Z]{3,10} \//;

/** A reason as a header value: printable ASCII only (names are ASCII; the rest becomes "?"). */
function headerSafe(reason: string): string {
  return reason.replace(/[^\x20-\x7e]/g, "?").slice(0, 512);
}
