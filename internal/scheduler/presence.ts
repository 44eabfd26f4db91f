/**
 * WorkerPresence: which worker processes are alive, for cleaning up after the dead ones
 * (their warm sandboxes). A worker beats every third of its ttl; a worker whose last beat
 * is older than its ttl is dead. A record outlives its worker (RECORD_KEEP_MS) so others
 * can tell "dead" from "never seen": a worker never seen may belong to another deployment
 * on the same Docker engine, and its containers are never ours to judge.
 *
 * Adapters: redis-presence.ts (shared by every process of a deployment; the clock is
 * Redis's, so workers' clocks may differ) and memory-presence.ts (one process: `agentd dev`).
 * Must never call a worker dead while its beats arrive within its ttl.
 */
export type PresenceState = "alive" | "dead" | "unknown";

/** How long a worker's record is kept after its last beat (then it is "unknown"). */
export const RECORD_KEEP_MS = 24 * 60 * 60_000;

export interface WorkerPresence {
  /** Records that `workerId` is alive now and will beat again within `ttlMs`. */
  beat(workerId: string, ttlMs: number): Promise<void>;
  /** "dead": its last beat is older than its ttl; "unknown": no record of it. */
  stateOf(workerId: string): Promise<PresenceState>;
}
