/**
 * The egress proxy (issue #16; not yet wired to the sandboxes): forward HTTP and CONNECT
 * for a run's sandbox. It resolves names itself and connects to the address it checked
 * (no second lookup a rebinding DNS could change), allows only what `checkDestination`
 * allows, and for a CONNECT tunnel requires the TLS ClientHello's server name to be the
 * host the tunnel was opened to. Every connection is reported (host, port, method,
 * decision, bytes each way, duration); connections at once, bytes per connection and idle
 * time are bounded. Must never: connect before the check, or carry a tunnel whose first
 * bytes are not TLS for its host.
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
  reason: string;
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
}

export interface EgressProxyOptions {
  check: DestinationCheck;
  /** Every address of a name; default: the system resolver (dns.lookup, all). */
  resolve?: (host: string) => Promise<string[]>;
  maxConnections?: number;
  /** Bytes each way per connection. */
  maxBytes?: number;
  connectTimeoutMs?: number;
  idleTimeoutMs?: number;
  onConnection?: (r: ConnectionRecord) => void;
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
  const connectTimeout = opts.connectTimeoutMs ?? 10_000;
  const idleTimeout = opts.idleTimeoutMs ?? 60_000;
  let open = 0;
  const sockets = new Set<net.Socket>();

  /** Checks host:port and gives the address to connect to, or the reason it is refused. */
  async function decide(
    host: string,
    port: number,
  ): Promise<{ address: string } | { reason: string }> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) return { reason: "a bad port" };
    let addresses: string[];
    try {
      addresses = net.isIP(host) !== 0 ? [host] : await resolve(host);
    } catch {
      addresses = [];
    }
    const v = checkDestination(opts.check, host, port, addresses);
    return v.ok ? { address: addresses[0] as string } : { reason: v.reason };
  }

  function report(r: Omit<ConnectionRecord, "durationMs">, t0: number): void {
    opts.onConnection?.({ ...r, durationMs: Math.round(performance.now() - t0) });
  }

  const server = http.createServer((req, res) => {
    void forward(req, res);
  });
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    void tunnel(req, client, head);
  });
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });

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
    const refuse = (status: string, reason: string): void => {
      client.end(
        `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nx-agentd-egress: ${reason.replace(/[\r\n]/g, " ")}\r\n\r\n${reason}\n`,
      );
      report(
        { host, port, method: "CONNECT", allowed: false, reason, bytesUp: 0, bytesDown: 0 },
        t0,
      );
    };
    if (m === null) return refuse("400 Bad Request", "CONNECT needs HOST:PORT");
    if (open >= maxConnections)
      return refuse("429 Too Many Requests", `more than ${maxConnections} connections at once`);
    open++;
    try {
      const d = await decide(host, port);
      if ("reason" in d) return refuse("403 Forbidden", d.reason);
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      const hello = await firstBytes(client, head);
      const sni = readSni(hello);
      if (sni.kind !== "sni" || sni.name !== host) {
        const why =
          sni.kind === "sni"
            ? `the TLS server name ${sni.name} is not ${host}`
            : `not TLS for ${host} (${sni.kind === "not-tls" ? sni.reason : "cut short"})`;
        client.destroy();
        report(
          { host, port, method: "CONNECT", allowed: false, reason: why, bytesUp: 0, bytesDown: 0 },
          t0,
        );
        return;
      }
      const counts = await splice(client, d.address, port, hello);
      report({ host, port, method: "CONNECT", allowed: true, reason: "allowed", ...counts }, t0);
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
      const upstream = net.connect({ host: address, port });
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
        client.on("data", (b: Buffer) => {
          up += b.length;
          if (up > maxBytes) return finish();
          upstream.write(b);
        });
        upstream.on("data", (b: Buffer) => {
          down += b.length;
          if (down > maxBytes) return finish();
          client.write(b);
        });
        client.resume();
      });
      for (const s of [client, upstream]) {
        s.on("timeout", finish);
        s.on("error", finish);
        s.on("close", finish);
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
    const deny = (status: number, reason: string): void => {
      res
        .writeHead(status, {
          "content-type": "text/plain",
          "x-agentd-egress": reason.replace(/[\r\n]/g, " "),
        })
        .end(`${reason}\n`);
      report({ host, port, method, allowed: false, reason, bytesUp: 0, bytesDown: 0 }, t0);
    };
    if (open >= maxConnections) return deny(429, `more than ${maxConnections} connections at once`);
    open++;
    try {
      const d = await decide(host, port);
      if ("reason" in d) return deny(403, d.reason);
      const headers = { ...req.headers };
      for (const h of ["proxy-authorization", "proxy-connection", "connection", "keep-alive"])
        delete headers[h];
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
            res.writeHead(upstream.statusCode ?? 502, upstream.headers);
            upstream.on("data", (b: Buffer) => {
              down += b.length;
              if (down > maxBytes) upstream.destroy();
            });
            upstream.pipe(res);
            upstream.on("end", resolve);
            upstream.on("error", resolve);
            upstream.on("close", resolve);
          },
        );
        out.on("timeout", () => out.destroy(new Error("timed out")));
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
        });
        req.pipe(out);
      });
      report(
        { host, port, method, allowed: true, reason: "allowed", bytesUp: up, bytesDown: down },
        t0,
      );
    } finally {
      open--;
    }
  }

  return {
    listen: (host, port) => listenOn(server, host, port),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
