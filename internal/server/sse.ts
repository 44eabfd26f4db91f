/**
 * GET /v1/runs/{id}/events as Server-Sent Events, for browsers and curl. Each event is
 * `id: <seq>`, `event: <type>`, `data: <stored canonical JSON>` (the exact bytes the hash
 * chain covers). Resume with the standard `Last-Event-ID` header (or `?after_seq=`); the
 * stream ends after the run's terminal event.
 */
import type http from "node:http";
import type http2 from "node:http2";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { hasRole } from "../api/context.ts";
import type { ApiDeps } from "../api/deps.ts";
import { toConnectError } from "../api/errors.ts";
import { openRunEvents } from "../api/stream-events.ts";
import type { Authenticator, Principal } from "../auth/tokens.ts";
import { AgentdError } from "../errors.ts";
import { isLogRewound } from "../eventlog/log-rewound-error.ts";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { metrics } from "../telemetry/metrics.ts";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
/** What SSE needs of an HTTP/1.1 or HTTP/2 compat response (their union is not callable). */
export interface Res {
  writeHead(status: number, headers: Record<string, string>): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  on(event: "close", fn: () => void): unknown;
  once(event: "drain", fn: () => void): unknown;
}

/** Comment lines keep proxies from closing an idle stream. */
const KEEPALIVE_MS = 15_000;

export const SSE_PATH = /^\/v1\/runs\/([^/]+)\/events$/;

/** One SSE message: `id:`, `event:`, `data:` (one line of JSON). */
export interface SseMessage {
  id: string;
  type: string;
  data: string;
}

/** Opens the messages for a caller (validating first: errors answer before any byte). */
export type OpenSse = (
  principal: Principal,
  lastEventId: string | undefined,
  signal: AbortSignal,
) => Promise<AsyncIterable<SseMessage>>;

/** GET /v1/runs/{id}/events: one run's events, `id:` its seq. */
export function serveSse(
  deps: ApiDeps,
  auth: Authenticator,
  req: Req,
  res: Res,
  runId: string,
  url: URL,
  /** Logs a failure; `incident` is the id the client was given, when it was given one. */
  onError: (err: unknown, incident?: string) => void,
): Promise<void> {
  return serveSseStream(auth, req, res, onError, "sse", async (principal, lastId, signal) => {
    const raw = lastId ?? url.searchParams.get("after_seq") ?? "0";
    const field = lastId !== undefined ? "Last-Event-ID" : "after_seq";
    if (!/^\d{1,19}$/.test(raw.trim())) {
      throw new AgentdError(
        "EVALIDATION",
        `${field}: must be a non-negative integer (the last seq seen)`,
        { field },
      );
    }
    const events = await openRunEvents(deps, principal, runId, BigInt(raw.trim()), false, signal);
    return (async function* () {
      for await (const ev of events) yield { id: String(ev.seq), type: ev.type, data: ev.json };
    })();
  });
}

/**
 * Authenticates (role read), opens the messages, then streams them as text/event-stream
 * with keepalive comments, waiting for drain when the client reads slowly.
 */
export async function serveSseStream(
  auth: Authenticator,
  req: Req,
  res: Res,
  onError: (err: unknown, incident?: string) => void,
  kind: "sse" | "watch",
  open: OpenSse,
): Promise<void> {
  const ac = new AbortController();
  res.on("close", () => ac.abort());
  let started = false;
  let keepalive: NodeJS.Timeout | undefined;
  const gauge = metrics.streamsOpen.labels({ kind });
  try {
    const principal = auth.authenticate(header(req, "authorization"));
    if (!hasRole(principal, "read"))
      throw new AgentdError("EPERMISSION", "reading events needs the 'read' role");
    // Validation and NOT_FOUND surface here, before any byte is sent; the headers go out
    // at once, not with the first event (a stream may stay idle for long).
    const messages = await open(principal, header(req, "last-event-id"), ac.signal);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    started = true;
    gauge.inc();
    res.write(": agentd event stream\n\n");
    keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS);
    for await (const m of messages) {
      const ok = res.write(`id: ${m.id}\nevent: ${m.type}\ndata: ${m.data}\n\n`);
      // A client gone while we wait for drain must not hold the stream (and its tail) forever.
      if (!ok && !ac.signal.aborted) {
        await new Promise<void>((r) => {
          res.once("drain", () => r());
          ac.signal.addEventListener("abort", () => r(), { once: true });
        });
      }
      if (ac.signal.aborted) break;
    }
    res.end();
  } catch (err) {
    if (started) {
      if (isLogRewound(err) && !ac.signal.aborted) {
        // The store lost events this stream sent: tell the client to resync (docs/api.md).
        const data = JSON.stringify({
          code: "data_loss",
          message: err.message,
          storedSeq: err.stored.seq,
        });
        res.end(`event: resync\ndata: ${data}\n\n`);
        return;
      }
      if (!ac.signal.aborted) onError(err);
      res.end();
      return;
    }
    // The same mapping as the RPCs, in the Connect protocol's JSON error shape.
    const ce = toConnectError(err, onError);
    const field = err instanceof AgentdError ? err.field : undefined;
    // A rate limit's RetryInfo is also an HTTP Retry-After (whole seconds, rounded up).
    const delay = ce.findDetails(RetryInfoSchema)[0]?.retryDelay;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (delay !== undefined)
      headers["retry-after"] = String(
        Math.max(1, Math.ceil(Number(delay.seconds) + delay.nanos / 1e9)),
      );
    res.writeHead(codeToHttpStatus(ce.code), headers);
    res.end(JSON.stringify({ code: codeToString(ce.code), message: ce.rawMessage, field }));
  } finally {
    clearInterval(keepalive);
    if (started) gauge.dec();
  }
}

function header(req: Req, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
