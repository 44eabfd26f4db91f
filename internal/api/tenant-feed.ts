/**
 * The tenant-wide event feed behind WatchEvents and GET /v1/events: every event of the
 * caller's tenant across its runs, in the order the log applied them (the log-wide feed,
 * EventLog.readFeed), filtered by event type and run labels, each with the cursor to resume
 * after it (`<feed entry id>:<seq>`). Followed by polling the feed (POLL_MS when idle).
 * Must never: deliver another tenant's event, skip an event between a cursor and the next
 * one delivered, or silently jump over a part of the feed that was trimmed (OUT_OF_RANGE).
 */

import { AgentdError, invalid } from "../errors.ts";
import { LoggedEvent } from "../eventlog/event-codec.ts";
import type { FeedEntry } from "../eventlog/port.ts";
import { createRunOriginCache } from "../eventlog/run-origin.ts";
import { sleep } from "../sleep.ts";
import type { ApiDeps } from "./deps.ts";
import { matchesSelector, parseSelector, type Requirement } from "./labels.ts";

export interface FeedQuery {
  /** "" or a cursor from an earlier answer. */
  cursor: string;
  fromOldest: boolean;
  types: readonly string[];
  labelSelector: string;
}

export interface FeedItem {
  event: LoggedEvent;
  cursor: string;
}

/** How often an idle feed is looked at again, ms. */
export const POLL_MS = 100;
const PAGE = 256;
const MAX_TYPES = 64;
const TYPE_RE = /^[a-z][a-z_]*(\.[a-z_]+)*(\.\*)?$/;
const CURSOR_RE = /^(\d{1,20}(?:-\d{1,20})?):(\d{1,19})$/;
/** Redis stream ids are two unsigned 64-bit numbers. */
const U64_MAX = 2n ** 64n - 1n;

/**
 * Tenant-wide watches one tenant may hold open on one server at once (WatchEvents and
 * GET /v1/events together): each polls the feed, so they are a cost on Redis.
 */
export const MAX_WATCHES_PER_TENANT = 32;
const watching = new Map<string, number>();

/** Takes a watch slot for `tenantId` (RESOURCE_EXHAUSTED when none is left); call the result to give it back. */
export function watchSlot(tenantId: string): () => void {
  const n = watching.get(tenantId) ?? 0;
  if (n >= MAX_WATCHES_PER_TENANT)
    throw new AgentdError(
      "EBUSY",
      `tenant ${tenantId} already has ${n} event watches open on this server (at most ${MAX_WATCHES_PER_TENANT})`,
    );
  watching.set(tenantId, n + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (watching.get(tenantId) ?? 1) - 1;
    if (left <= 0) watching.delete(tenantId);
    else watching.set(tenantId, left);
  };
}

/** Validated filters and start; errors name the field. */
export interface FeedPlan {
  /** First feed entry to read (inclusive); "" = the oldest kept. */
  from: string;
  /** Events of the entry `from` up to this seq were delivered already (Infinity: all). */
  skipThrough: number;
  /** The entry `from` must still be in the feed (a cursor was given). */
  mustFind: boolean;
  /** Start at the head: the entry `from` is skipped whole (nothing before "now"). */
  atHead: boolean;
  wantType: (type: string) => boolean;
  selector: Requirement[];
}

export function planFeed(
  q: FeedQuery,
  field = { cursor: "cursor", types: "types", labels: "label_selector" },
): FeedPlan {
  if (q.types.length > MAX_TYPES) throw invalid(field.types, `at most ${MAX_TYPES} types`);
  q.types.forEach((t, i) => {
    if (!TYPE_RE.test(t))
      throw invalid(
        `${field.types}[${i}]`,
        `${JSON.stringify(t)} is not an event type (e.g. "approval.requested" or "tool.*")`,
      );
  });
  const exact = new Set(q.types.filter((t) => !t.endsWith(".*")));
  const families = q.types.filter((t) => t.endsWith(".*")).map((t) => t.slice(0, -1));
  const wantType = (type: string): boolean =>
    q.types.length === 0 || exact.has(type) || families.some((f) => type.startsWith(f));
  const selector = parseSelector(q.labelSelector, field.labels);
  if (q.cursor === "")
    return { from: "", skipThrough: 0, mustFind: false, atHead: !q.fromOldest, wantType, selector };
  const m = CURSOR_RE.exec(q.cursor);
  const tooBig = (m?.[1] ?? "").split("-").some((part) => BigInt(part) > U64_MAX);
  if (m === null || tooBig)
    throw invalid(field.cursor, "is not a cursor of this feed (give back one it returned)");
  return {
    from: m[1] as string,
    skipThrough: Number(m[2]),
    mustFind: true,
    atHead: false,
    wantType,
    selector,
  };
}

/** Where a follower starts, checked against the feed (see openFeed). */
export interface FeedStart {
  from: string;
  skipThrough: number;
  /** The entry `from` must be the first one read. */
  mustFind: boolean;
  /** Whether a missing `from` means the caller's cursor (else: the follower fell behind). */
  fromCursor: boolean;
}

/**
 * Resolves the plan's start against the feed now — the head for "from now", and a
 * cursor's entry must still be there (OUT_OF_RANGE otherwise) — so a caller can answer
 * errors before it starts a response. Then follows live until `signal` aborts.
 * `onProgress(cursor, caughtUp)` is called after each page whose events were all taken:
 * a cursor a consumer may save even when nothing matched its filters.
 */
export async function openFeed(
  deps: Pick<ApiDeps, "log">,
  accept: (tenantId: string) => boolean,
  plan: FeedPlan,
  signal: AbortSignal,
  onProgress?: (cursor: string, caughtUp: boolean) => void | Promise<void>,
): Promise<AsyncGenerator<FeedItem>> {
  const start = await startOf(deps, plan);
  return follow(deps, accept, plan, start, signal, onProgress);
}

/** One tenant's feed, as openFeed. */
export async function openTenantFeed(
  deps: Pick<ApiDeps, "log">,
  tenantId: string,
  plan: FeedPlan,
  signal: AbortSignal,
): Promise<AsyncGenerator<FeedItem>> {
  return openFeed(deps, (t) => t === tenantId, plan, signal);
}

async function startOf(deps: Pick<ApiDeps, "log">, plan: FeedPlan): Promise<FeedStart> {
  if (plan.atHead) {
    const head = await deps.log.feedHead();
    return {
      from: head,
      skipThrough: Number.POSITIVE_INFINITY,
      mustFind: head !== "",
      fromCursor: false,
    };
  }
  const start = {
    from: plan.from,
    skipThrough: plan.skipThrough,
    mustFind: plan.mustFind,
    fromCursor: plan.mustFind,
  };
  if (start.mustFind) {
    const first = (await deps.log.readFeed(start.from, 1))[0]?.id;
    // Missing: trimmed (the reader fell behind), past the head (never given out), or the
    // entry of a run deleted since (its successors are next).
    if (first !== start.from) {
      const beyond = compareFeedIds(start.from, (await deps.log.feedHead()) || "0") > 0;
      if (beyond || (await trimmed(deps, start.from))) throw fellBehind(true);
    }
  }
  return start;
}

/** The largest seq a cursor names: "every event of this entry" (an entry ends below it). */
export const WHOLE_ENTRY = "9999999999999999999";

async function* follow(
  deps: Pick<ApiDeps, "log">,
  accept: (tenantId: string) => boolean,
  plan: FeedPlan,
  start: FeedStart,
  signal: AbortSignal,
  onProgress?: (cursor: string, caughtUp: boolean) => void | Promise<void>,
): AsyncGenerator<FeedItem> {
  let { from, skipThrough, mustFind } = start;
  const origin = createRunOriginCache(deps.log);
  const labels = async (runId: string) => (await origin(runId))?.labels ?? {};
  while (!signal.aborted) {
    const page = await deps.log.readFeed(from, PAGE);
    if (mustFind && page[0]?.id !== from && (await trimmed(deps, from)))
      throw fellBehind(start.fromCursor && from === start.from);
    for (const entry of page) {
      const after = entry.id === from ? skipThrough : 0;
      if (!accept(entry.tenantId) || after >= entry.toSeq) continue;
      if (entry.event !== undefined) {
        // A notice (run.deleted, tenant.purged): its event is in the entry, its run is gone,
        // so no label selector can be matched against it: the type filter alone applies.
        const ev = new LoggedEvent(entry.runId, 1, entry.event);
        if (plan.wantType(ev.type)) yield { event: ev, cursor: `${entry.id}:1` };
        if (signal.aborted) return;
        continue;
      }
      if (plan.selector.length > 0 && !matchesSelector(await labels(entry.runId), plan.selector))
        continue;
      for (const ev of await eventsOf(deps, entry, after)) {
        if (plan.wantType(ev.type)) yield { event: ev, cursor: `${entry.id}:${ev.seq}` };
        if (signal.aborted) return;
      }
    }
    const last = page[page.length - 1];
    if (last !== undefined) {
      from = last.id;
      skipThrough = Number.POSITIVE_INFINITY;
      mustFind = true;
      await onProgress?.(`${last.id}:${WHOLE_ENTRY}`, page.length < PAGE);
    }
    if (page.length < PAGE) await sleep(POLL_MS, signal);
  }
}

/**
 * Whether the entry `id`, missing from the feed, was trimmed (older than the oldest entry
 * kept: the reader fell behind) rather than removed with its deleted run (lifecycle): then
 * the entries after it are simply next.
 */
async function trimmed(deps: Pick<ApiDeps, "log">, id: string): Promise<boolean> {
  const oldest = (await deps.log.readFeed("", 1))[0]?.id;
  return oldest !== undefined && compareFeedIds(id, oldest) < 0;
}

/** Orders feed ids: "ms-n" (Redis stream ids) or "n" (the embedded feed's line numbers). */
export function compareFeedIds(a: string, b: string): number {
  const [am = 0n, an = 0n] = a.split("-").map(BigInt);
  const [bm = 0n, bn = 0n] = b.split("-").map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  return an === bn ? 0 : an < bn ? -1 : 1;
}

async function eventsOf(
  deps: Pick<ApiDeps, "log">,
  e: FeedEntry,
  after: number,
): Promise<LoggedEvent[]> {
  const start = Math.max(e.fromSeq - 1, after);
  return deps.log.read(e.runId, start, e.toSeq - start);
}

function fellBehind(fromCursor: boolean): AgentdError {
  return new AgentdError(
    "EOUTOFRANGE",
    fromCursor
      ? "cursor: the feed no longer holds this position (it keeps the newest entries only); start again without a cursor"
      : "the watcher fell behind what the feed keeps; start again without a cursor",
    { field: "cursor" },
  );
}
