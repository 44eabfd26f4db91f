/**
 * EndedRunIndex on the embedded event log (`agentd dev`): one process owns the log and keeps
 * its runs in memory, so the ended runs are read from it each sweep (their end time: the
 * terminal event's, cached once known, since an ended run never changes) and claims live in
 * this process. There is nothing to backfill, and the file feed is not trimmed.
 *
 * Must never: list a run whose head says it has not ended.
 */
import type { EventLog, RunHead } from "../eventlog/port.ts";
import type { BackfillStep, EndedRunIndex } from "./port.ts";

/** What the index needs of the embedded log (FileEventLog has it). */
export interface EndedRunSource {
  allRunIds(): string[];
  head: EventLog["head"];
  read: EventLog["read"];
}

export class FileEndedRunIndex implements EndedRunIndex {
  readonly #log: EndedRunSource;
  /** Score of each ended run seen: its end time, or a claim's later score. */
  readonly #score = new Map<string, number>();
  readonly #now: () => number;

  constructor(log: EndedRunSource, now: () => number = Date.now) {
    this.#log = log;
    this.#now = now;
  }

  async now(): Promise<number> {
    return this.#now();
  }

  async #ended(): Promise<RunHead[]> {
    const heads = await Promise.all(this.#log.allRunIds().map((id) => this.#log.head(id)));
    return heads.filter((h): h is RunHead => h?.ended !== undefined);
  }

  async tenants(): Promise<string[]> {
    return [...new Set((await this.#ended()).map((h) => h.tenantId))];
  }

  async claimDue(tenantId: string, cutoffMs: number, requeueScore: number, limit: number) {
    const out: string[] = [];
    for (const h of await this.#ended()) {
      if (out.length >= limit) break;
      if (h.tenantId !== tenantId) continue;
      const score = this.#score.get(h.runId) ?? (await this.#endedAt(h));
      if (score > cutoffMs) continue;
      this.#score.set(h.runId, requeueScore);
      out.push(h.runId);
    }
    return out;
  }

  /** The terminal event's time (ms); the index's clock now when it does not parse. */
  async #endedAt(h: RunHead): Promise<number> {
    const [last] = await this.#log.read(h.runId, h.seq - 1, 1);
    const ts = last === undefined ? Number.NaN : tsOf(last.json);
    const at = Number.isFinite(ts) ? ts : this.#now();
    this.#score.set(h.runId, at);
    return at;
  }

  async remove(_tenantId: string, runId: string): Promise<void> {
    this.#score.delete(runId);
  }

  async backfill(): Promise<BackfillStep> {
    return { scanned: 0, added: 0, done: true };
  }

  async trimFeed(): Promise<number> {
    return 0;
  }
}

/** The `ts` of a stored event's JSON, ms (NaN when absent). */
function tsOf(json: string): number {
  const ts = (JSON.parse(json) as { ts?: unknown }).ts;
  return typeof ts === "string" ? Date.parse(ts) : Number.NaN;
}
