/**
 * The access log: one JSON line per API call (gRPC, gRPC-Web and Connect on the one port,
 * unary and streaming; a stream's line is written when it ends), separate from the debug
 * log. Fields: time, who (the token's name; never the token), tenant, rpc, run_id and
 * approval_id when the request names them (capped at MAX_ID chars; JSON escapes the rest),
 * result (OK or the status code name; CANCELED when the client left), duration_ms, peer,
 * bytes_in for UploadWorkspace. It must never carry a token, a prompt or any message body.
 *
 * How: the router's requestGate (`accessGate`) starts the entry before auth and writes it
 * when connect aborts the call's context, which connect does at the end of every call
 * (success, error or client gone); the interceptor (`accessInterceptor`) fills in the ids
 * from the request messages and marks a stream the client left.
 */

import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import {
  Code,
  ConnectError,
  type ContextKey,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import { type DestinationStream, type Logger as PinoLogger, pino } from "pino";
import { kPrincipal } from "../api/context.ts";

/** Longest id written; a longer (hostile) one is cut and marked with "…". */
export const MAX_ID = 128;

/** Where the lines go: "off", "-" (stdout) or a file path (appended, reopened on SIGHUP). */
export type AccessLogTarget = string;

export interface AccessLog {
  write(line: AccessLine): void;
  /** Reopens the file (after a rotation); no-op for stdout. */
  reopen(): void;
}

export interface AccessLine {
  who: string | null;
  tenant: string | null;
  rpc: string;
  run_id?: string;
  approval_id?: string;
  result: string;
  duration_ms: number;
  peer: string | null;
  bytes_in?: number;
}

/**
 * The access log for `target`, or undefined when it is "off". A file that cannot be opened
 * is refused here, at start (naming the flag), not found missing later.
 */
export function createAccessLog(target: AccessLogTarget): AccessLog | undefined {
  if (target === "off") return undefined;
  if (target !== "-") checkWritable(target);
  const dest =
    target === "-"
      ? pino.destination({ dest: 1, sync: false })
      : pino.destination({ dest: target, append: true, mkdir: true, sync: false });
  const log: PinoLogger = pino(
    { base: { log: "access" }, timestamp: pino.stdTimeFunctions.isoTime, level: "info" },
    dest as DestinationStream,
  );
  return {
    write: (line) => log.info(line),
    reopen: () => {
      if (target !== "-") dest.reopen();
    },
  };
}

function checkWritable(path: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true });
    closeSync(openSync(path, "a"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "an error";
    throw new Error(`--access-log: cannot append to ${JSON.stringify(path)} (${code})`);
  }
}

/** What the gate and the interceptor share about one call. */
interface Entry {
  runId?: string;
  approvalId?: string;
  bytesIn?: number;
  /** The interceptor ran: the call reached its handler. */
  started?: boolean;
  /** The handler answered (unary) or its response stream ran to its end. */
  finished?: boolean;
}

const kEntry: ContextKey<Entry | undefined> = createContextKey<Entry | undefined>(undefined, {
  description: "the call's access-log entry",
});

/** The caller's address, set per request by the server (contextValues). */
export const kPeer: ContextKey<string | null> = createContextKey<string | null>(null, {
  description: "the caller's address",
});

/** For the router's requestGate: starts the entry; writes the line when the call ends. */
export function accessGate(log: AccessLog): (ctx: HandlerContext) => void {
  return (ctx) => {
    if (ctx.service.typeName === "grpc.health.v1.Health") return; // probes: not API calls
    const start = performance.now();
    const entry: Entry = {};
    ctx.values.set(kEntry, entry);
    ctx.signal.addEventListener(
      "abort",
      () => {
        const p = ctx.values.get(kPrincipal);
        const line: AccessLine = {
          who: p?.name ?? null,
          tenant: p?.tenantId ?? null,
          rpc: `${ctx.service.typeName}/${ctx.method.name}`,
          result: resultOf(ctx.signal.reason, entry),
          duration_ms: Math.round(performance.now() - start),
          peer: ctx.values.get(kPeer),
        };
        if (entry.runId !== undefined) line.run_id = entry.runId;
        if (entry.approvalId !== undefined) line.approval_id = entry.approvalId;
        if (entry.bytesIn !== undefined) line.bytes_in = entry.bytesIn;
        log.write(line);
      },
      { once: true },
    );
  };
}

/**
 * OK, the status code's name, or CANCELED for a call its client left: the context was
 * aborted (client gone: HTTP/1.1 close, HTTP/2 reset) before the handler had finished.
 */
export function resultOf(
  reason: unknown,
  entry: { started?: boolean; finished?: boolean },
): string {
  if (reason instanceof ConnectError) return codeName(reason.code);
  if (entry.started === true && entry.finished !== true) return "CANCELED";
  return "OK";
}

/** Code.ResourceExhausted → "RESOURCE_EXHAUSTED". */
export function codeName(code: Code): string {
  return (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** A request's id as the line carries it: strings only, cut at MAX_ID. */
export function capId(v: unknown): string | undefined {
  if (typeof v !== "string" || v === "") return undefined;
  return v.length > MAX_ID ? `${v.slice(0, MAX_ID)}…` : v;
}

/** Notes the ids (and upload bytes) a request message names. */
function note(entry: Entry, message: unknown): void {
  const m = message as { runId?: unknown; approvalId?: unknown; chunk?: unknown };
  entry.runId ??= capId(m.runId);
  entry.approvalId ??= capId(m.approvalId);
  if (m.chunk instanceof Uint8Array) entry.bytesIn = (entry.bytesIn ?? 0) + m.chunk.byteLength;
}

/** Fills the entry from the request; marks a response stream its client left. */
export function accessInterceptor(): Interceptor {
  return (next) => async (req) => {
    const entry = req.contextValues.get(kEntry);
    if (entry === undefined) return next(req);
    entry.started = true;
    if (!req.stream) note(entry, req.message);
    else {
      const inner = req.message;
      req = {
        ...req,
        message: (async function* () {
          for await (const m of inner) {
            note(entry, m);
            yield m;
          }
        })(),
      };
    }
    const res = await next(req);
    if (!res.stream) {
      entry.finished = true;
      return res;
    }
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        yield* messages;
        // Not reached when the stream was returned early (its client went away) or threw.
        entry.finished = true;
      })(),
    };
  };
}
