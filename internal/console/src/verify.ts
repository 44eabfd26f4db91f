/**
 * Checks a run's hash chain in the browser, as `agentctl verify` does: each event's `hash`
 * is sha256 over the canonical JSON (keys sorted, no whitespace) of its protobuf JSON form
 * without `hash`, and `prevHash` is the previous event's hash (64 zeros for seq 1).
 */
import { toJson } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../../gen/agentd/v1/events_pb.js";

export const GENESIS = "0".repeat(64);

export type ChainResult =
  | { ok: true; through: bigint }
  | { ok: false; seq: bigint; why: string }
  | { ok: undefined; why: string };

function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(",")}]`;
  const obj = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(obj).sort()) {
    if (obj[k] !== undefined) parts.push(`${JSON.stringify(k)}:${canonicalJson(obj[k])}`);
  }
  return `{${parts.join(",")}}`;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Verifies events in seq order, carrying on from `prev` (the last result and hash). */
export async function verifyChain(
  events: readonly Event[],
  prev: { result: ChainResult; hash: string },
): Promise<{ result: ChainResult; hash: string }> {
  if (prev.result.ok !== true && prev.result.ok !== undefined) return prev;
  if (typeof crypto === "undefined" || crypto.subtle === undefined)
    return {
      result: { ok: undefined, why: "needs a secure context (https or localhost)" },
      hash: prev.hash,
    };
  let hash = prev.hash;
  let through = prev.result.ok === true ? prev.result.through : 0n;
  for (const e of events) {
    if (e.prevHash !== hash)
      return { result: { ok: false, seq: e.seq, why: "prev_hash does not match" }, hash };
    const json = toJson(EventSchema, e) as Record<string, unknown>;
    delete json.hash;
    const h = await sha256Hex(canonicalJson(json));
    if (h !== e.hash)
      return { result: { ok: false, seq: e.seq, why: "hash does not match the event" }, hash };
    hash = h;
    through = e.seq;
  }
  return { result: { ok: true, through }, hash };
}
