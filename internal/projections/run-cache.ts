/**
 * A cached Run projection per run, caught up from the log on read: the cache holds the
 * fold up to some seq, and each read applies only the events after it. It can be dropped
 * at any time and rebuilt from the log with the same answer (the log is the truth).
 * Each entry knows the hash of the last event it folded (lastHash): a log that lost events since (a
 * rewind: its head behind the entry, the same seq with another hash, or a next event that
 * does not chain onto it) is folded again from the start, never answered from the entry.
 * Must never: answer with events the stored log no longer holds.
 */
import type { EventLog, RunHead } from "../eventlog/port.ts";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { applyEvent, emptyRun, snapshotRun } from "./run-projection.ts";

export interface RunCacheOptions {
  log: EventLog;
  /** Most runs kept; the least recently used are dropped first. Default 10,000. */
  maxEntries?: number;
}

export class RunProjectionCache {
  readonly #log: EventLog;
  readonly #max: number;
  readonly #runs = new Map<string, Run>();
  /** Catch-ups in flight, so concurrent readers of one run share one log read. */
  readonly #inflight = new Map<string, Promise<Run>>();

  constructor(opts: RunCacheOptions) {
    this.#log = opts.log;
    this.#max = opts.maxEntries ?? 10_000;
  }

  /** The run projected up to `head.seq` (read from the log when not given). */
  async get(runId: string, head?: RunHead): Promise<Run | undefined> {
    let h = head ?? (await this.#log.head(runId));
    if (h === undefined) return undefined;
    for (;;) {
      let cached = this.#runs.get(runId);
      const seq = cached === undefined ? undefined : Number(cached.lastSeq);
      if (seq !== undefined && seq > h.seq) {
        // The head (given, or read before another reader folded further) may only be older.
        const fresh = await this.#log.head(runId);
        if (fresh !== undefined && fresh.seq >= seq) {
          h = fresh;
          continue;
        }
      }
      // The log holds less than the entry folded, or another event at its seq: rewound.
      if (seq !== undefined && (seq > h.seq || (seq === h.seq && cached?.lastHash !== h.hash))) {
        this.#runs.delete(runId);
        cached = undefined;
      }
      if (cached !== undefined && seq === h.seq) {
        this.#touch(runId, cached);
        return snapshotRun(cached);
      }
      const running = this.#inflight.get(runId);
      if (running !== undefined) {
        // Someone is catching up already; it may stop short of our head: look again after.
        await running;
        continue;
      }
      const p = this.#catchUp(runId, cached, h.seq).finally(() => this.#inflight.delete(runId));
      this.#inflight.set(runId, p);
      return snapshotRun(await p);
    }
  }

  /** Many runs at once (heads read in one round trip). */
  async getMany(runIds: readonly string[]): Promise<(Run | undefined)[]> {
    const heads = await this.#log.heads(runIds);
    return Promise.all(runIds.map((id, i) => (heads[i] ? this.get(id, heads[i]) : undefined)));
  }

  /** Forgets one run, or all: the next read rebuilds from the log. */
  drop(runId?: string): void {
    if (runId === undefined) this.#runs.clear();
    else this.#runs.delete(runId);
  }

  async #catchUp(runId: string, base: Run | undefined, toSeq: number): Promise<Run> {
    let run = base ?? emptyRun(runId);
    let after = Number(run.lastSeq);
    while (after < toSeq) {
      const page = await this.#log.read(runId, after, 1000);
      if (page.length === 0) break;
      // The entry's last event is no longer the one before these: fold from the start.
      if (after > 0 && page[0]?.event.prevHash !== run.lastHash) {
        run = emptyRun(runId);
        after = 0;
        continue;
      }
      for (const ev of page) applyEvent(run, ev.event);
      after = Number(run.lastSeq);
    }
    this.#touch(runId, run);
    return run;
  }

  #touch(runId: string, run: Run): void {
    this.#runs.delete(runId);
    this.#runs.set(runId, run);
    if (this.#runs.size > this.#max) {
      const oldest = this.#runs.keys().next().value;
      if (oldest !== undefined) this.#runs.delete(oldest);
    }
  }
}
