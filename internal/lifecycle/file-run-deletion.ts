/**
 * RunDeletionStore on the embedded log (`agentd dev`, demos without Redis): the tombstone is
 * a file beside the run's (FileEventLog.writeTombstone), written in the run's commit lock
 * after the check that the run ended, so no append interleaves; an ended run takes no claim
 * or resume. Artifact references are found by reading every other run's events, which the
 * embedded log keeps in memory (it is for single-node use).
 *
 * Must never: tombstone a live run, or drop the tombstone before the run's files are gone.
 */
import type { FileEventLog } from "../eventlog/file-event-log.ts";
import type { IdempotencyStore } from "../idempotency/port.ts";
import type { RunQueue } from "../scheduler/port.ts";
import type { StoredRuns } from "../tenancy/stored-runs.ts";
import { FileUploadReceipts } from "./file-upload-receipts.ts";
import type { DeletionRecord, MarkResult, RunDeletionStore, RunTombstone } from "./port.ts";
import { digestsOf } from "./run-digests.ts";

interface StoredTombstone extends RunTombstone {
  /** Set once every piece is gone: the tombstone is kept until then, ms since the epoch. */
  keepUntil?: number;
}

export interface FileRunDeletionOptions {
  log: FileEventLog;
  /** The queue of the same process: a run it holds claimed is live. */
  queue?: RunQueue;
  idempotency?: IdempotencyStore;
  now?: () => number;
  /** Where upload receipts are kept (`<dir>/upload-receipts.json`); undefined: memory only. */
  receiptsPath?: string;
}

export class FileRunDeletion implements RunDeletionStore {
  readonly #log: FileEventLog;
  readonly #queue: RunQueue | undefined;
  readonly #idem: IdempotencyStore | undefined;
  readonly #now: () => number;
  readonly receipts: FileUploadReceipts;

  constructor(opts: FileRunDeletionOptions) {
    this.#log = opts.log;
    this.receipts = new FileUploadReceipts(
      async (d) => (await this.#unreferenced("", [d])).length === 0,
      opts.receiptsPath,
    );
    this.#queue = opts.queue;
    this.#idem = opts.idempotency;
    this.#now = opts.now ?? Date.now;
  }

  /** What one-process tenant ledgers are counted again from at start (tenancy/). */
  ledgerSource(): StoredRuns {
    const log = this.#log;
    return {
      runIds: () => log.allRunIds(),
      tenantOf: async (runId) => (await log.head(runId))?.tenantId,
      digests: (runId) => this.digests(runId),
      events: (runId) => log.read(runId, 0),
      receipts: () => this.receipts.entries(),
    };
  }

  /** Drops tombstones whose keep time is over (call at start). */
  async expire(): Promise<number> {
    let n = 0;
    for (const id of this.#log.tombstoneIds()) {
      const t = this.#stored(id);
      if (t?.keepUntil !== undefined && t.keepUntil <= this.#now()) {
        await this.#log.dropTombstone(id);
        n++;
      }
    }
    return n;
  }

  #stored(runId: string): StoredTombstone | undefined {
    const v = this.#log.tombstoneOf(runId);
    if (v === undefined) return undefined;
    try {
      return JSON.parse(v) as StoredTombstone;
    } catch {
      // A torn tombstone: the run was being deleted; finish with what the log still knows.
      return { runId, tenantId: "", sessionId: "", ended: "", by: "", reason: "", at: 0 };
    }
  }

  async #check(runId: string, tenantId: string | undefined): Promise<MarkResult> {
    const prior = this.#stored(runId);
    if (prior !== undefined) return { kind: "already", tombstone: prior };
    const head = await this.#log.head(runId);
    if (head === undefined || (tenantId !== undefined && head.tenantId !== tenantId))
      return { kind: "absent" };
    const q = await this.#queue?.stateOf(runId);
    if (head.ended === undefined) return { kind: "live", state: liveState(q) };
    if (q !== undefined && q !== "ended") return { kind: "live", state: liveState(q) };
    const tombstone: RunTombstone = {
      runId,
      tenantId: head.tenantId,
      sessionId: head.sessionId,
      ended: head.ended,
      by: "",
      reason: "",
      at: this.#now(),
    };
    return { kind: "marked", tombstone };
  }

  check(runId: string, tenantId: string | undefined): Promise<MarkResult> {
    return this.#log.lockRun(runId, () => this.#check(runId, tenantId));
  }

  mark(
    runId: string,
    tenantId: string | undefined,
    rec: DeletionRecord,
    notice: (t: RunTombstone) => string,
  ): Promise<MarkResult> {
    return this.#log.lockRun(runId, async () => {
      const r = await this.#check(runId, tenantId);
      if (r.kind !== "marked") return r;
      const tombstone = { ...r.tombstone, by: rec.by, reason: rec.reason, at: rec.at };
      await this.#log.writeTombstone(runId, JSON.stringify(tombstone));
      // Not atomic with the tombstone here (a crash between loses the notice, never the
      // deletion): the embedded log is one process's, for dev and demos.
      await this.#log.publish(tombstone.tenantId, runId, notice(tombstone));
      return { kind: "marked", tombstone };
    });
  }

  async tombstone(runId: string): Promise<RunTombstone | undefined> {
    return this.#stored(runId);
  }

  async pending(limit: number): Promise<string[]> {
    return this.#log
      .tombstoneIds()
      .filter((id) => this.#stored(id)?.keepUntil === undefined)
      .slice(0, limit);
  }

  async digests(runId: string): Promise<string[]> {
    const out = new Set<string>();
    for (const ev of await this.#log.read(runId, 0)) for (const d of digestsOf(ev.json)) out.add(d);
    return [...out];
  }

  async releaseArtifacts(runId: string, digests: readonly string[]): Promise<string[]> {
    const free = (await this.#unreferenced(runId, digests)).filter(
      (d) => !this.receipts.references(d),
    );
    for (const d of free) this.receipts.markRemoving(d);
    return free;
  }

  /** Those of `digests` no run but `runId` names in its events. */
  async #unreferenced(runId: string, digests: readonly string[]): Promise<string[]> {
    const left = new Set(digests);
    for (const other of this.#log.allRunIds()) {
      if (other === runId || left.size === 0) continue;
      for (const ev of await this.#log.read(other, 0))
        for (const d of digestsOf(ev.json)) left.delete(d);
    }
    // Runs being deleted still hold their events: their references no longer count.
    return [...left];
  }

  async tenantReferences(tenantId: string, digest: string): Promise<boolean> {
    if (this.receipts.heldBy(tenantId, digest)) return true;
    for (const id of this.#log.allRunIds()) {
      // A run whose deletion began released its references (its events go next).
      if (this.#log.tombstoneOf(id) !== undefined) continue;
      if ((await this.#log.head(id))?.tenantId !== tenantId) continue;
      for (const ev of await this.#log.read(id, 0))
        if (digestsOf(ev.json).includes(digest)) return true;
    }
    return false;
  }

  async forgetIdempotency(t: RunTombstone): Promise<void> {
    await this.#idem?.forgetRun(t.tenantId, t.runId);
  }

  async purge(t: RunTombstone): Promise<void> {
    await this.#log.purgeRun(t.runId);
  }

  async finish(t: RunTombstone, keepMs: number): Promise<void> {
    const stored = this.#stored(t.runId) ?? t;
    await this.#log.lockRun(t.runId, () =>
      this.#log.writeTombstone(
        t.runId,
        JSON.stringify({ ...stored, keepUntil: this.#now() + keepMs }),
      ),
    );
  }
}

function liveState(q: string | undefined): string {
  if (q === "paused") return "paused (waiting for an approval)";
  if (q === "claimed") return "running";
  if (q === "ready" || q === "waiting") return "queued";
  return q ?? "live";
}
