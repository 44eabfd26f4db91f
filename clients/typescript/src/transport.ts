/**
 * The connection: a connect-node gRPC client of agentd.v1.RunService over HTTP/2 (h2c for
 * http://, TLS for https://, trusting a private CA when given one) that sends the bearer
 * token, the caller's headers and trace context with every call, and which errors are
 * worth retrying. Must never: send the token anywhere but the address it was given.
 */
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  type Interceptor,
} from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RunService } from "./gen/agentd/v1/run_service_pb.js";

export type RunClient = Client<typeof RunService>;

export interface ConnectOptions {
  /** HOST:PORT or http(s)://HOST:PORT. */
  address: string;
  /** Bearer token (agentd dev without an auth file needs none). */
  token?: string | undefined;
  /**
   * PEM certificate(s) of the CA that signed the server's certificate, for a private CA.
   * They replace Node's bundled roots for this connection; to add a CA to those instead,
   * start Node with NODE_EXTRA_CA_CERTS=FILE. Default: Node's roots.
   */
  ca?: string | Uint8Array | undefined;
  /** Headers sent with every call (e.g. a proxy's); authorization is the token's. */
  headers?: Record<string, string> | undefined;
  /**
   * W3C trace context to continue (e.g. a CI job's TRACEPARENT): a run created through this
   * client joins that trace. Default: none, the server starts a trace per run.
   */
  traceparent?: string | undefined;
  /** W3C tracestate sent with `traceparent`. */
  tracestate?: string | undefined;
  /**
   * Deadline of each unary call, milliseconds (DEADLINE_EXCEEDED past it); streams such as
   * followEvents are not cut. Default: none. A call's own `timeoutMs` option wins.
   */
  timeoutMs?: number | undefined;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The headers every call carries; throws a TypeError naming the bad option. */
export function callHeaders(o: ConnectOptions): Record<string, string> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k))
      throw new TypeError(`headers: ${JSON.stringify(k)} is not a header name`);
    if (/[\r\n\0]/.test(v)) throw new TypeError(`headers.${k}: a value holds no line break`);
    if (k.toLowerCase() === "authorization")
      throw new TypeError("headers.authorization: give the token as the token option");
    h[k.toLowerCase()] = v;
  }
  if (o.traceparent !== undefined && o.traceparent !== "") {
    if (!TRACEPARENT.test(o.traceparent))
      throw new TypeError(
        `traceparent ${JSON.stringify(o.traceparent.slice(0, 80))}: not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)`,
      );
    h.traceparent = o.traceparent;
    if (o.tracestate !== undefined && o.tracestate !== "") {
      if (o.tracestate.length > 512 || !/^[\x20-\x7e]*$/.test(o.tracestate))
        throw new TypeError("tracestate: at most 512 printable ASCII characters");
      h.tracestate = o.tracestate;
    }
  }
  return h;
}

function headerInterceptor(
  token: string | undefined,
  headers: Record<string, string>,
): Interceptor {
  return (next) => (req) => {
    for (const [k, v] of Object.entries(headers)) if (!req.header.has(k)) req.header.set(k, v);
    if (token !== undefined && token !== "") req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/** Unary calls get `ms` as their deadline unless the call set one (grpc-timeout). */
function deadlineInterceptor(ms: number): Interceptor {
  return (next) => async (req) => {
    if (req.stream || req.header.has("grpc-timeout") || req.signal.aborted) return next(req);
    const timer = AbortSignal.timeout(ms);
    const signal = AbortSignal.any([req.signal, timer]);
    try {
      return await next({ ...req, signal });
    } catch (err) {
      if (timer.aborted && !req.signal.aborted)
        throw new ConnectError(`no answer within ${ms} ms (timeoutMs)`, Code.DeadlineExceeded);
      throw err;
    }
  };
}

/** The base URL of an address: http:// when none is given. */
export function baseUrl(address: string): string {
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `http://${address}`;
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new TypeError(
      `address ${JSON.stringify(address)}: only http:// (h2c) and https:// are supported`,
    );
  return url.replace(/\/+$/, "");
}

export function createRunClient(o: ConnectOptions): RunClient {
  const headers = callHeaders(o);
  if (o.timeoutMs !== undefined && !(Number.isInteger(o.timeoutMs) && o.timeoutMs > 0))
    throw new TypeError(`timeoutMs: a whole number of milliseconds above 0, not ${o.timeoutMs}`);
  const interceptors: Interceptor[] = [headerInterceptor(o.token, headers)];
  if (o.timeoutMs !== undefined) interceptors.push(deadlineInterceptor(o.timeoutMs));
  const transport = createGrpcTransport({
    baseUrl: baseUrl(o.address),
    // Keep-alive pings notice a dead server while a follow waits quietly for events.
    pingIntervalMs: 30_000,
    pingTimeoutMs: 15_000,
    ...(o.ca === undefined
      ? {}
      : { nodeOptions: { ca: typeof o.ca === "string" ? o.ca : Buffer.from(o.ca) } }),
    interceptors,
  });
  return createClient(RunService, transport);
}

/** A system error code (ECONNREFUSED…) somewhere in an error's causes. */
export function systemCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 8 && e instanceof Error; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A dropped connection or a server going away: worth calling again. */
export function isTransient(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  return (
    err.code === Code.Unavailable ||
    // A server shutting down resets its streams (RST_STREAM CANCEL); the caller's own
    // abort is told apart by its signal.
    err.code === Code.Canceled ||
    (err.code === Code.Aborted && systemCode(err.cause) !== undefined) ||
    (err.code === Code.Internal && /stream|protocol|socket|goaway/i.test(err.rawMessage))
  );
}
