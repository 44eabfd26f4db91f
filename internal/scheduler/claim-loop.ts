/**
 * The waiting part of claim(), shared by both adapters: the deadline, the abort signal, the
 * per-worker maxRuns count and the wake-ups. The adapter supplies one atomic attempt and a
 * way to sleep until its store may have something new. Never decides which run is next.
 */
import { invalid } from "../errors.ts";
import { checkWorkerId } from "./options.ts";
import type { Claim, ClaimOptions } from "./port.ts";

/** One attempt: a claim, or how to sleep until it is worth trying again. */
export type Attempt =
  | { claim: Claim }
  | { claim?: undefined; sleep: (ms: number, signal: AbortSignal) => Promise<void> };

export class ClaimLoop {
  readonly #held = new Map<string, Set<string>>();
  readonly #wakers = new Set<() => void>();
  readonly #closed = new AbortController();
  readonly #pollMs: number;

  constructor(pollMs: number) {
    this.#pollMs = pollMs;
  }

  async run(
    workerId: string,
    opts: ClaimOptions,
    attempt: () => Promise<Attempt>,
  ): Promise<Claim | undefined> {
    checkWorkerId(workerId);
    const { maxRuns, blockMs } = opts;
    if (maxRuns !== undefined && (!Number.isInteger(maxRuns) || maxRuns < 1)) {
      throw invalid("max_runs", "must be an integer >= 1");
    }
    if (!Number.isFinite(blockMs) || blockMs < 0) throw invalid("block_ms", "must be >= 0");
    const signal =
      opts.signal === undefined
        ? this.#closed.signal
        : AbortSignal.any([opts.signal, this.#closed.signal]);
    const deadline = Date.now() + blockMs;
    for (;;) {
      if (signal.aborted) return undefined;
      const full = maxRuns !== undefined && (this.#held.get(workerId)?.size ?? 0) >= maxRuns;
      let sleep = (ms: number, s: AbortSignal) => this.sleepLocal(ms, s);
      if (!full) {
        const a = await attempt();
        if (a.claim !== undefined) {
          // Counted even if the caller aborted meanwhile: the run is claimed and leased now.
          const mine = this.#held.get(workerId) ?? new Set<string>();
          mine.add(a.claim.runId);
          this.#held.set(workerId, mine);
          return a.claim;
        }
        sleep = a.sleep;
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted) return undefined;
      // Capped by pollMs: expired leases make no noise, they are found by trying again.
      await sleep(Math.max(1, Math.min(left, this.#pollMs)), signal);
    }
  }

  /** A claim was released (any outcome, even a failed release): frees its maxRuns place. */
  released(claim: Claim): void {
    const mine = this.#held.get(claim.lease.workerId);
    mine?.delete(claim.runId);
    if (mine?.size === 0) this.#held.delete(claim.lease.workerId);
    this.notify();
  }

  /** Wakes every local sleeper (they try again). */
  notify(): void {
    for (const w of [...this.#wakers]) w();
  }

  /** Sleeps until notify(), `ms` or abort, whichever comes first. */
  sleepLocal(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.#wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done, { once: true });
      this.#wakers.add(done);
    });
  }

  close(): void {
    this.#closed.abort();
  }
}
