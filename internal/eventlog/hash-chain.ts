/**
 * The tamper-evident chain: each event's `hash` is sha256 over its canonical JSON without
 * `hash`, and `prevHash` links to the previous event. verifyChain names the first bad seq.
 */
import { hash } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";

/** prevHash of seq 1. */
export const GENESIS_HASH = "0".repeat(64);

export function sha256Hex(data: string | Uint8Array): string {
  // One-shot crypto.hash: half the cost of createHash().update().digest() on event-sized input.
  return hash("sha256", data, "hex");
}

/** The hash an event (JSON object form, `hash` ignored) must carry. */
export function computeEventHash(event: Record<string, unknown>): string {
  const { hash: _ignored, ...rest } = event;
  return sha256Hex(canonicalJson(rest));
}

export type ChainVerdict =
  | { ok: true; count: number; headHash: string }
  | { ok: false; count: number; seq: number; reason: string };

/**
 * Verifies a run's events in log order (JSON strings or parsed objects, protobuf-JSON form).
 * Checks: seq is 1, 2, 3… without gaps; each prevHash is the previous hash; each hash is
 * the sha256 of the event's canonical JSON without `hash`. Returns the first broken seq.
 */
export function verifyChain(events: Iterable<string | Record<string, unknown>>): ChainVerdict {
  let expectedSeq = 1;
  let prev = GENESIS_HASH;
  let count = 0;
  for (const raw of events) {
    let ev: Record<string, unknown>;
    try {
      ev = typeof raw === "string" ? (JSON.parse(raw) as Record<string, unknown>) : raw;
    } catch {
      return { ok: false, count, seq: expectedSeq, reason: "event is not valid JSON" };
    }
    const seq = Number(ev.seq);
    if (seq !== expectedSeq) {
      return {
        ok: false,
        count,
        seq: expectedSeq,
        reason: `expected seq ${expectedSeq}, found ${String(ev.seq)}`,
      };
    }
    if (ev.prevHash !== prev) {
      return { ok: false, count, seq, reason: "prevHash does not match the previous event's hash" };
    }
    const want = computeEventHash(ev);
    if (ev.hash !== want) {
      return { ok: false, count, seq, reason: "hash does not match the event's content" };
    }
    prev = want;
    expectedSeq++;
    count++;
  }
  return { ok: true, count, headHash: prev };
}
