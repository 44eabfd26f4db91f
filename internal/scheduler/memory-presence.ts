/**
 * WorkerPresence in one process (`agentd dev`): only this process's own workers are ever
 * seen; anything else is "unknown" (a previous dev process's warm sandboxes are left to the
 * age rule of DockerSandbox.reap). Must never be shared across processes.
 */
import { checkTtl, checkWorkerId } from "./options.ts";
import { type PresenceState, RECORD_KEEP_MS, type WorkerPresence } from "./presence.ts";

export class MemoryWorkerPresence implements WorkerPresence {
  readonly #seen = new Map<string, { at: number; ttl: number }>();
  readonly #now: () => number;

  constructor(opts: { now?: () => number } = {}) {
    this.#now = opts.now ?? Date.now;
  }

  async beat(workerId: string, ttlMs: number): Promise<void> {
    checkWorkerId(workerId);
    checkTtl(ttlMs);
    this.#seen.set(workerId, { at: this.#now(), ttl: ttlMs });
  }

  async stateOf(workerId: string): Promise<PresenceState> {
    checkWorkerId(workerId);
    const r = this.#seen.get(workerId);
    const age = r === undefined ? Number.POSITIVE_INFINITY : this.#now() - r.at;
    if (r === undefined || age > RECORD_KEEP_MS) return "unknown";
    return age > r.ttl ? "dead" : "alive";
  }
}
