/**
 * `agentctl verify RUN --head SEQ:HASH`: does the stored log still hold the head a client
 * saw? A client that kept the last head it saw (from `verify`, a follow, an export) can
 * tell a log that lost events after it — Redis lost acknowledged writes — from one that
 * merely grew. Also reads the log's own `log.rewound` records, which say where a loss
 * began. Pure: parses the flag and judges a verified chain; never fetches anything.
 */
import { UsageError } from "./client.ts";

/** A head as a client saw it. */
export interface SeenHead {
  seq: number;
  hash: string;
}

const HEAD_RE = /^(\d{1,15}):([0-9a-f]{64})$/;

/** Parses `--head SEQ:HASH` (seq ≥ 1, hash 64 lowercase hex digits). */
export function parseHead(raw: string): SeenHead {
  const m = HEAD_RE.exec(raw.trim());
  const seq = Number(m?.[1] ?? 0);
  if (m === null || seq < 1) {
    throw new UsageError(
      `--head must be SEQ:HASH, a seq from 1 and the 64 hex digits of that event's hash, as verify prints them (got ${JSON.stringify(raw.slice(0, 100))})`,
      "verify",
    );
  }
  return { seq, hash: m[2] as string };
}

/** One stored event as verify reads it (protobuf-JSON). */
type Stored = Record<string, unknown>;

/** The loss the log itself records (its first `log.rewound`), if any. */
export function recordedLoss(
  events: readonly Stored[],
): { atSeq: number; storedSeq: number; expectedSeq: number } | undefined {
  for (const ev of events) {
    if (ev.type !== "log.rewound") continue;
    const p = (ev.logRewound ?? {}) as Record<string, unknown>;
    return {
      atSeq: Number(ev.seq),
      storedSeq: Number(p.storedSeq ?? 0),
      expectedSeq: Number(p.expectedSeq ?? 0),
    };
  }
  return undefined;
}

/**
 * Judges a chain (already verified) against the head a client saw: undefined when the log
 * holds it, else the sentence that says what was lost.
 */
export function headVerdict(
  runId: string,
  events: readonly Stored[],
  seen: SeenHead,
): string | undefined {
  const at = events[seen.seq - 1];
  if (at !== undefined && at.hash === seen.hash) return undefined;
  const loss = recordedLoss(events);
  // Where the loss began: the log's own record says so; else what is known from here.
  const after =
    loss !== undefined && loss.storedSeq < seen.seq
      ? loss.storedSeq
      : at === undefined
        ? events.length
        : undefined;
  const where =
    after === undefined
      ? `at or before seq ${seen.seq} (it holds another event there, hash ${String(at?.hash)})`
      : `after seq ${after}`;
  return `run ${runId}: the stored log lost events ${where}: you saw seq ${seen.seq} (hash ${seen.hash}) but the log ends at seq ${events.length}`;
}
