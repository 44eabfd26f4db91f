/**
 * One sink's delivery loop. It takes the sink's lease (so exactly one process delivers a
 * sink at a time, whichever server it runs in), reads the sink's cursor from the event
 * store, follows the feed from there and delivers each event that passes the sink's
 * filters: retried with backoff (retry-schedule.ts: by default for at least 6.5 minutes)
 * up to maxAttempts, then dead-lettered (kept in the store,
 * counted), the cursor saved after each event (at-least-once: a restart or a takeover
 * repeats at most the event in flight). It runs apart from runs and the API: a sink that
 * fails or hangs only holds its own loop (each request has a timeout), never an append.
 * Must never: move the cursor past an event that was neither delivered nor dead-lettered,
 * or deliver without holding the lease.
 */
import { type FeedItem, openFeed, planFeed, WHOLE_ENTRY } from "../api/tenant-feed.ts";
import { isAgentdError } from "../errors.ts";
import type { EventLog } from "../eventlog/port.ts";
import { sleep } from "../sleep.ts";
import { primeSinkSeries } from "../telemetry/known-series.ts";
import type { Logger } from "../telemetry/logger.ts";
import { metrics } from "../telemetry/metrics.ts";
import { createBackoff } from "../worker/backoff.ts";
import type { Sink } from "./config.ts";
import { createRetrySchedule } from "./retry-schedule.ts";
import type { ExportState } from "./state.ts";
import { redactUrlCredentials } from "./url-credentials.ts";

/** Delivers one event; `signal` aborts when the runner stops (end the request at once). */
export type Deliver = (item: FeedItem, attempt: number, signal: AbortSignal) => Promise<void>;

export interface RunnerDeps {
  log: EventLog;
  state: ExportState;
  /** This process's holder id for leases. */
  holder: string;
  logger: Logger;
  /** Sink lease time-to-live; renewed every third of it. Default 10 s. */
  leaseTtlMs?: number;
}

export interface SinkRunner {
  stop(): Promise<void>;
}

export function startSinkRunner(sink: Sink, deliver: Deliver, deps: RunnerDeps): SinkRunner {
  const stop = new AbortController();
  const ttl = deps.leaseTtlMs ?? 10_000;
  const log = deps.logger.child({ sink: sink.name });
  // Its counters exist at 0 on every server, whichever of them holds the sink's lease.
  primeSinkSeries(sink.name);
  const pace = createBackoff({ baseMs: 500, capMs: 30_000 });
  const loop = (async () => {
    while (!stop.signal.aborted) {
      const lost = new AbortController();
      try {
        if (!(await deps.state.lease(sink.name, deps.holder, ttl))) {
          await sleep(ttl / 3, stop.signal);
          continue;
        }
        const renew = keepLease(sink.name, deps, ttl, lost);
        try {
          log.info({ holder: deps.holder }, "export sink: delivering");
          await deliverAll(sink, deliver, deps, AbortSignal.any([stop.signal, lost.signal]));
        } finally {
          clearInterval(renew);
        }
        pace.reset();
      } catch (err) {
        if (stop.signal.aborted) break;
        log.warn(
          {
            err: {
              code: (err as { code?: unknown }).code,
              message: redactUrlCredentials(String((err as Error).message)),
            },
          },
          "export sink: stopped; starting again",
        );
        await sleep(pace.next(), stop.signal);
      }
    }
    await deps.state.release(sink.name, deps.holder).catch(() => undefined);
  })();
  return {
    async stop() {
      stop.abort();
      await loop;
    },
  };
}

/** Renews the lease every third of its TTL; aborts `lost` when it is gone or cannot be renewed. */
function keepLease(
  sink: string,
  deps: RunnerDeps,
  ttl: number,
  lost: AbortController,
): NodeJS.Timeout {
  const t = setInterval(() => {
    deps.state.lease(sink, deps.holder, ttl).then(
      (held) => held || lost.abort("lease lost"),
      () => lost.abort("lease renewal failed"),
    );
  }, ttl / 3);
  t.unref();
  return t;
}

/** A stored cursor meaning "from the oldest event kept" (a sink that has seen nothing yet). */
export const OLDEST = "oldest";
/** How often a sink that delivers nothing saves how far it has read, ms. */
const PROGRESS_EVERY_MS = 1000;

/**
 * Delivers from the stored cursor on, until `signal` aborts. A sink without a cursor saves
 * where it starts before anything else (the feed's head, or OLDEST), so a restart never
 * jumps past events that came meanwhile; while nothing passes its filters it still saves
 * how far it read (progress), so a rare type does not leave its cursor to be trimmed.
 */
async function deliverAll(
  sink: Sink,
  deliver: Deliver,
  deps: RunnerDeps,
  signal: AbortSignal,
): Promise<void> {
  const tenants = new Set(sink.tenants);
  const accept = (t: string): boolean => tenants.size === 0 || tenants.has(t);
  const save = async (cursor: string): Promise<void> => {
    if (!(await deps.state.setCursor(sink.name, deps.holder, cursor)))
      throw new Error("the sink's lease was lost");
  };
  let cursor = await deps.state.cursor(sink.name);
  if (cursor === "") {
    const head = sink.start === "now" ? await deps.log.feedHead() : "";
    cursor = head === "" ? OLDEST : `${head}:${WHOLE_ENTRY}`;
    await save(cursor);
  }
  let savedAt = Date.now();
  const progress = async (at: string, caughtUp: boolean): Promise<void> => {
    if (caughtUp) metrics.exportLag.set({ sink: sink.name }, 0);
    if (Date.now() - savedAt < PROGRESS_EVERY_MS) return;
    await save(at);
    savedAt = Date.now();
  };
  for (;;) {
    const plan = planFeed({
      cursor: cursor === OLDEST ? "" : cursor,
      fromOldest: cursor === OLDEST,
      types: sink.types,
      labelSelector: "",
    });
    try {
      const items = await openFeed(deps, accept, plan, signal, progress);
      for await (const item of items) {
        await deliverOne(sink, deliver, deps, item, signal);
        await save(item.cursor);
        savedAt = Date.now();
      }
      return; // aborted
    } catch (err) {
      if (!isAgentdError(err, "EOUTOFRANGE")) throw err;
      // The cursor's part of the feed was trimmed: what it held is gone for every reader.
      metrics.exportDeliveries.inc({ sink: sink.name, result: "gap" });
      deps.logger.error(
        { sink: sink.name, cursor },
        "export sink: its cursor fell out of the feed; going on from the oldest event kept",
      );
      cursor = OLDEST;
      await save(cursor);
    }
  }
}

/** One event: delivered, or dead-lettered after maxAttempts; throws only when aborted. */
async function deliverOne(
  sink: Sink,
  deliver: Deliver,
  deps: RunnerDeps,
  item: FeedItem,
  signal: AbortSignal,
): Promise<void> {
  // Equal jitter: the retries of one event last at least retrySpan(sink).minMs.
  const backoff = createRetrySchedule(sink.backoff);
  const ts = item.event.event.ts;
  for (let attempt = 1; ; attempt++) {
    if (signal.aborted) throw new Error("stopped");
    if (ts !== undefined)
      metrics.exportLag.set(
        { sink: sink.name },
        Math.max(0, Date.now() / 1000 - Number(ts.seconds)),
      );
    try {
      await deliver(item, attempt, signal);
      metrics.exportDeliveries.inc({ sink: sink.name, result: "ok" });
      return;
    } catch (err) {
      if (signal.aborted) throw err;
      const why = describe(err);
      if (attempt >= sink.maxAttempts) {
        await deps.state.deadLetter(sink.name, {
          cursor: item.cursor,
          eventId: item.event.event.eventId,
          type: item.event.type,
          runId: item.event.runId,
          attempts: attempt,
          error: why,
          at: new Date().toISOString(),
        });
        metrics.exportDeliveries.inc({ sink: sink.name, result: "dead_letter" });
        metrics.exportDeadLetters.inc({ sink: sink.name });
        deps.logger.warn(
          { sink: sink.name, eventId: item.event.event.eventId, attempts: attempt, error: why },
          "export sink: dead-lettered an event",
        );
        return;
      }
      metrics.exportDeliveries.inc({ sink: sink.name, result: "retry" });
      await sleep(backoff.next(), signal);
    }
  }
}

/**
 * An error as a short cause (status, timeout, connection), never a response body, and with
 * any URL's credentials masked: it is logged and stored in the dead letters.
 */
function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string } };
  if (e?.name === "TimeoutError") return "timed out";
  if (e?.cause?.code !== undefined) return redactUrlCredentials(String(e.cause.code));
  return redactUrlCredentials(String(e?.message ?? err)).slice(0, 200);
}
