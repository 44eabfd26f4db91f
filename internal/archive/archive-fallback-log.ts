/**
 * An EventLog that answers from run archives (archive-shelf.ts) for runs the live log does
 * not hold (deleted after they were archived), and from the live log for every other run;
 * with no live log (agentctl's offline `--archive`), from the archives alone. An archived
 * run is ended and read-only: its events are served as stored, nothing is ever appended to
 * it (the API refuses writes by name: interceptors/archived-read-only.ts).
 * Must never: serve an archive for a run the live log holds, or write to an archive.
 */
import { AgentdError } from "../errors.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type {
  AppendRequest,
  EventLog,
  FeedEntry,
  ListRunIdsQuery,
  RunHead,
  RunIdPage,
} from "../eventlog/port.ts";
import type { OpenedArchive } from "./open-archive.ts";

/** The error of any write to an archived run, naming the run and what was refused. */
export function archivedReadOnly(runId: string, what: string): AgentdError {
  return new AgentdError(
    "ECONFLICT",
    `run ${runId} is archived and served read-only from its archive: ${what} is refused`,
  );
}

/** Where a run's archive is found (archive-shelf.ts; one given archive offline). */
export interface ArchiveFinder {
  /** The run's verified archive, or undefined; throws when one exists but does not verify. */
  find(runId: string): Promise<OpenedArchive | undefined>;
}

function headOf(a: OpenedArchive): RunHead {
  const h = a.head;
  return {
    runId: h.runId,
    tenantId: h.tenantId,
    sessionId: h.sessionId,
    seq: h.seq,
    hash: h.hash,
    epoch: 0,
    ended: h.ended,
  };
}

export class ArchiveFallbackLog implements EventLog {
  readonly kind: string;
  readonly #live: EventLog | undefined;
  readonly #shelf: ArchiveFinder;

  /** @param live the live log; undefined: archives only (offline). */
  constructor(shelf: ArchiveFinder, live?: EventLog) {
    this.#live = live;
    this.#shelf = shelf;
    this.kind = live?.kind ?? "archive";
  }

  /** The run's archive when the live log does not hold the run; else undefined. */
  async archivedRun(runId: string): Promise<OpenedArchive | undefined> {
    if (this.#live !== undefined && (await this.#live.head(runId)) !== undefined) return undefined;
    return this.#shelf.find(runId);
  }

  async append(req: AppendRequest): Promise<LoggedEvent> {
    if (this.#live === undefined) throw archivedReadOnly(req.runId, "an append");
    return this.#live.append(req);
  }

  async read(runId: string, afterSeq: number, limit?: number): Promise<LoggedEvent[]> {
    const got = this.#live === undefined ? [] : await this.#live.read(runId, afterSeq, limit);
    if (got.length > 0) return got;
    const a = await this.archivedRun(runId);
    if (a === undefined) return got;
    return a.events.slice(afterSeq, limit === undefined ? undefined : afterSeq + limit);
  }

  async *follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<LoggedEvent> {
    for await (const batch of this.followBatches(runId, afterSeq, signal)) yield* batch;
  }

  async *followBatches(
    runId: string,
    afterSeq: number,
    signal: AbortSignal,
  ): AsyncIterable<LoggedEvent[]> {
    const a = await this.archivedRun(runId);
    // An archived run has ended: its stored events are all there will ever be.
    if (a !== undefined) {
      const rest = a.events.slice(afterSeq);
      if (rest.length > 0 && !signal.aborted) yield rest;
      return;
    }
    if (this.#live !== undefined) yield* this.#live.followBatches(runId, afterSeq, signal);
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const live = await this.#live?.head(runId);
    if (live !== undefined) return live;
    const a = await this.#shelf.find(runId);
    return a === undefined ? undefined : headOf(a);
  }

  async heads(runIds: readonly string[]): Promise<(RunHead | undefined)[]> {
    const live =
      this.#live === undefined ? runIds.map(() => undefined) : await this.#live.heads(runIds);
    return Promise.all(
      live.map(async (h, i) => {
        if (h !== undefined) return h;
        const a = await this.#shelf.find(runIds[i] as string);
        return a === undefined ? undefined : headOf(a);
      }),
    );
  }

  replicated<T>(read: () => Promise<T>): Promise<T> {
    return this.#live?.replicated === undefined ? read() : this.#live.replicated(read);
  }

  async bumpEpoch(runId: string): Promise<number> {
    if (this.#live === undefined) throw archivedReadOnly(runId, "a lease");
    return this.#live.bumpEpoch(runId);
  }

  /** An archived run is never driven again: its name key is the live log's or none. */
  async runNameKey(runId: string): Promise<Uint8Array> {
    if (this.#live === undefined) throw archivedReadOnly(runId, "a name key");
    return this.#live.runNameKey(runId);
  }

  async listRunIds(query: ListRunIdsQuery): Promise<RunIdPage> {
    return this.#live === undefined
      ? { runIds: [], next: undefined }
      : this.#live.listRunIds(query);
  }

  async readFeed(from: string, limit: number): Promise<FeedEntry[]> {
    return this.#live === undefined ? [] : this.#live.readFeed(from, limit);
  }

  async feedHead(): Promise<string> {
    return this.#live === undefined ? "" : this.#live.feedHead();
  }

  async publish(tenantId: string, runId: string, json: string): Promise<void> {
    if (this.#live === undefined) throw archivedReadOnly(runId, "a feed notice");
    return this.#live.publish(tenantId, runId, json);
  }

  async ping(): Promise<void> {
    await this.#live?.ping();
  }

  async close(): Promise<void> {
    // The live log belongs to whoever built it; the shelf holds no handles.
  }
}
