/**
 * The connection: a connect-node gRPC client of agentd.v1.RunService over HTTP/2 (h2c for
 * http://, TLS for https://) that sends the bearer token with every call, and which errors
 * are worth retrying. Must never: send the token anywhere but the address it was given.
 */
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RunService } from "./gen/agentd/v1/run_service_pb.js";

export type RunClient = Client<typeof RunService>;

export interface ConnectOptions {
  /** HOST:PORT or http(s)://HOST:PORT. */
  address: string;
  /** Bearer token (agentd dev without an auth file needs none). */
  token?: string | undefined;
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
  const token = o.token;
  const transport = createGrpcTransport({
    baseUrl: baseUrl(o.address),
    // Keep-alive pings notice a dead server while a follow waits quietly for events.
    pingIntervalMs: 30_000,
    pingTimeoutMs: 15_000,
    interceptors:
      token === undefined || token === ""
        ? []
        : [
            (next) => (req) => {
              req.header.set("authorization", `Bearer ${token}`);
              return next(req);
            },
          ],
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
