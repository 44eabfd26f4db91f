/**
 * The embedded EventLog: one append-only NDJSON file per run under a data directory,
 * written with group commit and fdatasync before an append is acknowledged. Default for
 * `agentd dev` and for tests that need no Redis. One process owns a data directory (LOCK).
 *
 * Why NDJSON and not node:sqlite: the format is the stored canonical JSON itself (the bytes
 * the hash chain covers), readable with cat and jq, one file per run so damage stays local,
 * and a torn last line after a crash is detected and cut at start. node:sqlite is still
 * experimental in Node 24 and would add a second encoding of every event.
 *
 * Terminal is terminal: a commit to a run whose last event ended it is refused (EENDED, by
 * the batcher), in the same per-run lock as the write; after a restart the end is read back
 * from the run's last line.
 *
 * Never rewrites a stored line; the only truncation is of a torn (unterminated) last line.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, unlinkSync } from "node:fs";
import {
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  truncate,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import { AgentdError } from "../errors.ts";
import { AppendBatcher, type Commit, type CommitOutcome, type Head } from "./append-batcher.ts";
import { hashOf } from "./chain-links.ts";
import { LoggedEvent, TERMINAL_TYPES } from "./event-codec.ts";
import { FileFeed } from "./file-feed.ts";
import { followLog, followLogBatches, type LiveFeed } from "./follow.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import type {
  AppendRequest,
  EventLog,
  FeedEntry,
  ListRunIdsQuery,
  RunHead,
  RunIdPage,
} from "./port.ts";

export interface FileEventLogOptions {
  /** The data directory; created when missing. */
  dir: string;
  /** fdatasync every commit before acknowledging it. Default true; false only for benchmarks of the format. */
  fsync?: boolean;
}

interface RunMeta {
  tenantId: string;
  sessionId: string;
  epoch: number;
}

interface FileRun {
  runId: string;
  meta: RunMeta;
  /** Stored lines, index = seq - 1. */
  lines: string[];
  hash: string;
  /** The terminal event's type once the run ended (it is then the last line, for good). */
  ended: string | undefined;
  fh: FileHandle | undefined;
  listeners: Set<(ev: LoggedEvent) => void>;
}

const RUN_ID_FILE = /^([0-9A-Za-z_-]{1,128})\.ndjson$/;
const TOMBSTONE_FILE = /^([0-9A-Za-z_-]{1,128})\.deleted\.json$/;
const RUN_ID = /^[0-9A-Za-z_-]{1,128}$/;

/** Opens (and recovers) the embedded log in `opts.dir`. */
export async function openFileEventLog(opts: FileEventLogOptions): Promise<FileEventLog> {
  const runsDir = join(opts.dir, "runs");
  await mkdir(runsDir, { recursive: true });
  const unlock = await lockDir(opts.dir);
  const feed = new FileFeed(join(opts.dir, "feed.ndjson"), opts.fsync ?? true);
  const log = new FileEventLog(runsDir, opts.fsync ?? true, unlock, feed);
  try {
    await log.load();
  } catch (err) {
    unlock();
    throw err;
  }
  return log;
}

export class FileEventLog implements EventLog {
  readonly kind = "file";
  readonly #dir: string;
  readonly #fsync: boolean;
  readonly #unlock: () => void;
  readonly #runs = new Map<string, FileRun>();
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #batcher: AppendBatcher;
  readonly #feed: LiveFeed;
  readonly #wide: FileFeed;
  /**
   * Tombstones of deleted runs (internal/lifecycle): run id → the record, stored as
   * `<run>.deleted.json` beside the run's files. A tombstoned run is absent to readers and
   * takes no append.
   */
  readonly #tombstones = new Map<string, string>();
  /** Set when the feed could not be written: the log refuses appends from then on. */
  #feedBroken: AgentdError | undefined;
  #closed = false;

  constructor(dir: string, fsync: boolean, unlock: () => void, feed: FileFeed) {
    this.#dir = dir;
    this.#wide = feed;
    this.#fsync = fsync;
    this.#unlock = unlock;
    this.#batcher = new AppendBatcher({
      loadHead: async (runId) => this.#head(runId),
      commit: (c) => this.#withRunLock(c.runId, () => this.#commit(c)),
    });
    this.#feed = {
      subscribe: async (runId, onEvent) => {
        const run = this.#runOrEmpty(runId);
        run.listeners.add(onEvent);
        return () => run.listeners.delete(onEvent);
      },
    };
  }

  /** Reads every run file (cutting a torn last line left by a crash), then the feed. */
  async load(): Promise<void> {
    await this.#loadTombstones();
    await this.#loadRuns();
    await this.#wide.load();
    await this.#wide.recover(
      [...this.#runs.values()].map((r) => ({
        runId: r.runId,
        tenantId: r.meta.tenantId,
        seq: r.lines.length,
      })),
    );
  }

  async #loadTombstones(): Promise<void> {
    for (const name of await readdir(this.#dir)) {
      const m = TOMBSTONE_FILE.exec(name);
      if (m === null) continue;
      const text = await readFile(join(this.#dir, name), "utf8").catch(() => "");
      // A torn tombstone (a crash while writing it) still marks the run: it was being deleted.
      this.#tombstones.set(m[1] as string, text.trim() === "" ? "{}" : text);
    }
  }

  async #loadRuns(): Promise<void> {
    for (const name of await readdir(this.#dir)) {
      const m = RUN_ID_FILE.exec(name);
      if (m === null) continue;
      const runId = m[1] as string;
      const meta = await this.#readMeta(runId);
      if (meta === undefined) continue;
      const path = join(this.#dir, name);
      const text = await readFile(path, "utf8");
      const end = text.lastIndexOf("\n") + 1;
      if (end < text.length) {
        // A write torn by a crash: it was never acknowledged, so it is not part of the log.
        await truncate(path, Buffer.byteLength(text.slice(0, end)));
      }
      const lines = end === 0 ? [] : text.slice(0, end - 1).split("\n");
      const { hash, ended } = headOf(lines[lines.length - 1]);
      this.#runs.set(runId, {
        runId,
        meta,
        lines,
        hash,
        ended,
        fh: undefined,
        listeners: new Set(),
      });
    }
  }

  async #readMeta(runId: string): Promise<RunMeta | undefined> {
    try {
      return JSON.parse(await readFile(join(this.#dir, `${runId}.meta.json`), "utf8")) as RunMeta;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new AgentdError("EIO", `run ${runId}: unreadable metadata`, { cause: err });
    }
  }

  async #writeMeta(runId: string, meta: RunMeta): Promise<void> {
    const path = join(this.#dir, `${runId}.meta.json`);
    const tmp = `${path}.tmp`;
    await writeFile(tmp, JSON.stringify(meta), { flush: this.#fsync });
    await rename(tmp, path);
    if (this.#fsync) fsyncDir(this.#dir);
  }

  #runOrEmpty(runId: string): FileRun {
    let run = this.#runs.get(runId);
    if (run === undefined) {
      run = {
        runId,
        meta: { tenantId: "", sessionId: "", epoch: 0 },
        lines: [],
        hash: GENESIS_HASH,
        ended: undefined,
        fh: undefined,
        listeners: new Set(),
      };
      this.#runs.set(runId, run);
    }
    return run;
  }

  /** Serialises commits and epoch bumps of one run (the fence check and the write are one step). */
  async #withRunLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(runId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => undefined);
    this.#locks.set(runId, settled);
    try {
      return await next;
    } finally {
      if (this.#locks.get(runId) === settled) this.#locks.delete(runId);
    }
  }

  #head(runId: string): Head {
    const run = this.#runs.get(runId);
    return run === undefined
      ? { seq: 0, hash: GENESIS_HASH }
      : { seq: run.lines.length, hash: run.hash, ended: run.ended };
  }

  append(req: AppendRequest): Promise<LoggedEvent> {
    if (this.#closed) return Promise.reject(new AgentdError("EUNAVAILABLE", "event log is closed"));
    if (this.#feedBroken !== undefined) return Promise.reject(this.#feedBroken);
    return this.#batcher.append(req);
  }

  async #commit(c: Commit): Promise<CommitOutcome> {
    // A deleted run is never written again, whoever writes (its id must not come back).
    if (this.#tombstones.has(c.runId)) return { kind: "deleted" };
    const run = this.#runOrEmpty(c.runId);
    if (run.ended !== undefined) {
      // Terminal is terminal, whoever writes: checked before the fence and the head.
      return { kind: "conflict", head: this.#head(c.runId) };
    }
    if (c.known !== undefined && !holds(run.lines, run.hash, c.known)) {
      // A rewound log (files cut back, a restore from an older backup): the writer saw an
      // event this log does not hold. Refused like the Redis script does.
      return { kind: "rewound", head: { seq: run.lines.length, hash: run.hash } };
    }
    if (c.fence !== undefined && c.fence !== run.meta.epoch) {
      return { kind: "fenced", epoch: run.meta.epoch };
    }
    if (run.lines.length !== c.prev.seq) {
      return { kind: "conflict", head: { seq: run.lines.length, hash: run.hash } };
    }
    try {
      if (c.prev.seq === 0) {
        run.meta = { tenantId: c.tenantId ?? "", sessionId: c.sessionId, epoch: run.meta.epoch };
        await this.#writeMeta(c.runId, run.meta);
      }
      if (run.fh === undefined) {
        run.fh = await open(join(this.#dir, `${c.runId}.ndjson`), "a");
        if (this.#fsync && c.prev.seq === 0) fsyncDir(this.#dir);
      }
      await run.fh.write(`${c.events.map((e) => e.json).join("\n")}\n`);
      if (this.#fsync) await run.fh.datasync();
    } catch (err) {
      throw new AgentdError("EIO", `run ${c.runId}: append failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const from = run.lines.length + 1;
    for (const e of c.events) run.lines.push(e.json);
    run.hash = c.events[c.events.length - 1]?.hash ?? run.hash;
    if (c.ends !== undefined && c.events.length > 0) run.ended = c.ends;
    // The commit is stored: it is applied whatever happens to its feed entry below.
    if (c.events.length > 0)
      await this.#feedEntry(c.runId, run.meta.tenantId, from, run.lines.length);
    for (const e of c.events) {
      const ev = new LoggedEvent(c.runId, e.seq, e.json);
      for (const l of run.listeners) l(ev);
    }
    return { kind: "ok" };
  }

  /**
   * The commit's feed entry. A feed that cannot be written stops the log (every later
   * append fails EIO, and /readyz says not ready): the feed's ids must stay what readers
   * saw, so nothing may be appended past a hole. The next start adds what is missing.
   */
  async #feedEntry(runId: string, tenantId: string, from: number, to: number): Promise<void> {
    if (this.#feedBroken !== undefined) return;
    try {
      await this.#wide.add(runId, tenantId, from, to);
    } catch (err) {
      this.#feedBroken = new AgentdError(
        "EIO",
        `the event feed (feed.ndjson) could not be written (${(err as Error).message}); restart agentd to recover it`,
        { cause: err },
      );
    }
  }

  async readFeed(from: string, limit: number): Promise<FeedEntry[]> {
    return this.#wide.read(from, limit);
  }

  async feedHead(): Promise<string> {
    return this.#wide.head();
  }

  async read(runId: string, afterSeq: number, limit?: number): Promise<LoggedEvent[]> {
    const run = this.#runs.get(runId);
    if (run === undefined) return [];
    const start = Math.max(0, afterSeq);
    const end = limit === undefined ? run.lines.length : Math.min(run.lines.length, start + limit);
    const out: LoggedEvent[] = [];
    for (let i = start; i < end; i++)
      out.push(new LoggedEvent(runId, i + 1, run.lines[i] as string));
    return out;
  }

  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<LoggedEvent> {
    return followLog((r, a, l) => this.read(r, a, l), this.#feed, runId, afterSeq, signal);
  }

  followBatches(
    runId: string,
    afterSeq: number,
    signal: AbortSignal,
  ): AsyncIterable<LoggedEvent[]> {
    return followLogBatches((r, a, l) => this.read(r, a, l), this.#feed, runId, afterSeq, signal);
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const run = this.#runs.get(runId);
    if (run === undefined || run.lines.length === 0 || this.#tombstones.has(runId))
      return undefined;
    const head: RunHead = {
      runId,
      tenantId: run.meta.tenantId,
      sessionId: run.meta.sessionId,
      seq: run.lines.length,
      hash: run.hash,
      epoch: run.meta.epoch,
    };
    if (run.ended !== undefined) head.ended = run.ended;
    return head;
  }

  async heads(runIds: readonly string[]): Promise<(RunHead | undefined)[]> {
    return Promise.all(runIds.map((id) => this.head(id)));
  }

  bumpEpoch(runId: string): Promise<number> {
    return this.#withRunLock(runId, async () => {
      const run = this.#runOrEmpty(runId);
      run.meta = { ...run.meta, epoch: run.meta.epoch + 1 };
      await this.#writeMeta(runId, run.meta);
      return run.meta.epoch;
    });
  }

  async runNameKey(runId: string): Promise<Uint8Array> {
    if (!RUN_ID.test(runId)) throw new AgentdError("EVALIDATION", "runId: not a run id");
    if (this.#tombstones.has(runId)) throw new AgentdError("ENOTFOUND", `run ${runId} was deleted`);
    // Created exclusively (flag wx, mode 0600): two callers that race both read the winner's.
    const path = join(this.#dir, `${runId}.namekey`);
    try {
      await writeFile(path, randomBytes(32).toString("hex"), {
        flag: "wx",
        mode: 0o600,
        flush: this.#fsync,
      });
      if (this.#fsync) fsyncDir(this.#dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST")
        throw new AgentdError("EIO", `run ${runId}: cannot store its name key`, { cause: err });
    }
    const hex = (await readFile(path, "utf8")).trim();
    if (!/^[0-9a-f]{64}$/.test(hex))
      throw new AgentdError("EIO", `run ${runId}: its name key is malformed`);
    return Buffer.from(hex, "hex");
  }

  async listRunIds(q: ListRunIdsQuery): Promise<RunIdPage> {
    const ids: string[] = [];
    for (const run of this.#runs.values()) {
      if (run.lines.length === 0 || run.meta.tenantId !== q.tenantId) continue;
      if (this.#tombstones.has(run.runId)) continue;
      if (q.sessionId !== undefined && run.meta.sessionId !== q.sessionId) continue;
      if (q.before !== undefined && run.runId >= q.before) continue;
      ids.push(run.runId);
    }
    ids.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
    const page = ids.slice(0, q.limit);
    return { runIds: page, next: ids.length > q.limit ? page[page.length - 1] : undefined };
  }

  /** Every run with events (any tenant): for the startup sweep of `agentd dev`. */
  allRunIds(): string[] {
    return [...this.#runs.values()]
      .filter((r) => r.lines.length > 0 && !this.#tombstones.has(r.runId))
      .map((r) => r.runId);
  }

  /** Runs `fn` in the run's commit lock: no append of the run interleaves (lifecycle). */
  lockRun<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    return this.#withRunLock(runId, fn);
  }

  /** The stored tombstone record of a run (lifecycle), if any. */
  tombstoneOf(runId: string): string | undefined {
    return this.#tombstones.get(runId);
  }

  /** Every tombstoned run id. */
  tombstoneIds(): string[] {
    return [...this.#tombstones.keys()];
  }

  /**
   * Writes (or rewrites) a run's tombstone durably (temp file, fsync, rename). From the
   * moment this resolves the run is absent to readers and refuses appends. Call it in
   * lockRun: it must not race the run's commits.
   */
  async writeTombstone(runId: string, record: string): Promise<void> {
    const path = join(this.#dir, `${runId}.deleted.json`);
    this.#tombstones.set(runId, record);
    await writeFile(`${path}.tmp`, record, { flush: this.#fsync });
    await rename(`${path}.tmp`, path);
    if (this.#fsync) fsyncDir(this.#dir);
  }

  /** Removes a tombstone whose keep time is over. */
  async dropTombstone(runId: string): Promise<void> {
    await rm(join(this.#dir, `${runId}.deleted.json`), { force: true });
    this.#tombstones.delete(runId);
  }

  /** Removes a tombstoned run's files and memory (its events, meta). Idempotent. */
  async purgeRun(runId: string): Promise<void> {
    if (!this.#tombstones.has(runId))
      throw new AgentdError("EIO", `run ${runId} is not tombstoned`);
    await this.#withRunLock(runId, async () => {
      const run = this.#runs.get(runId);
      await run?.fh?.close();
      this.#runs.delete(runId);
      await rm(join(this.#dir, `${runId}.ndjson`), { force: true });
      await rm(join(this.#dir, `${runId}.meta.json`), { force: true });
      await rm(join(this.#dir, `${runId}.namekey`), { force: true });
      if (this.#fsync) fsyncDir(this.#dir);
    });
  }

  /** Adds a notice (an event held by the feed itself: run.deleted, tenant.purged). */
  async publish(tenantId: string, runId: string, json: string): Promise<void> {
    if (this.#feedBroken !== undefined) throw this.#feedBroken;
    await this.#wide.add(runId, tenantId, 1, 1, json);
  }

  async ping(): Promise<void> {
    if (this.#closed) throw new AgentdError("EUNAVAILABLE", "event log is closed");
    if (this.#feedBroken !== undefined) throw this.#feedBroken;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#locks.values()]);
    for (const run of this.#runs.values()) await run.fh?.close();
    await this.#wide.close();
    this.#unlock();
  }
}

/**
 * Hash and end of a run from its last stored line (after a restart): the terminal event,
 * when it is the last line, keeps the run ended.
 */
function headOf(last: string | undefined): { hash: string; ended: string | undefined } {
  if (last === undefined) return { hash: GENESIS_HASH, ended: undefined };
  try {
    const ev = JSON.parse(last) as { hash?: unknown; type?: unknown };
    const type = typeof ev.type === "string" ? ev.type : "";
    return { hash: String(ev.hash ?? ""), ended: TERMINAL_TYPES.has(type) ? type : undefined };
  } catch {
    return { hash: "", ended: undefined };
  }
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Takes the data directory's LOCK file; a lock left by a dead process is taken over. */
async function lockDir(dir: string): Promise<() => void> {
  const path = join(dir, "LOCK");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fh = await open(path, "wx");
      await fh.write(String(process.pid));
      await fh.close();
      return () => {
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
      if (pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new AgentdError(
          "EUNAVAILABLE",
          `data directory ${dir} is in use by process ${pid} (LOCK); stop it or use another --data-dir`,
        );
      }
      await rename(path, `${path}.stale`).catch(() => undefined);
    }
  }
  throw new AgentdError("EUNAVAILABLE", `could not lock data directory ${dir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** True when the run's stored lines hold the event `known` (its seq and hash). */
function holds(lines: readonly string[], head: string, known: Head): boolean {
  if (lines.length < known.seq) return false;
  if (lines.length === known.seq) return head === known.hash;
  return hashOf(lines[known.seq - 1] ?? "") === known.hash;
}
