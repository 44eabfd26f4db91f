/**
 * The embedded log's log-wide feed (see EventLog.readFeed): one line per applied commit in
 * `feed.ndjson` ({r: run, t: tenant, a: first seq, b: last seq}); an entry's id is its line
 * number. Lines are written in id order, after the run's own write and before the append is
 * acknowledged. After a crash, commits whose line never made it are added again at load
 * (recover): the feed always covers every stored event. Must never: rewrite a line but a
 * torn last one, or give two entries one id.
 */
import { type FileHandle, open, readFile, truncate } from "node:fs/promises";
import type { FeedEntry } from "./port.ts";

interface Line {
  r: string;
  t: string;
  a: number;
  b: number;
}

export class FileFeed {
  readonly #path: string;
  readonly #fsync: boolean;
  readonly #entries: FeedEntry[] = [];
  #fh: FileHandle | undefined;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(path: string, fsync: boolean) {
    this.#path = path;
    this.#fsync = fsync;
  }

  /** Reads the feed file; cuts a torn last line. */
  async load(): Promise<void> {
    const text = await readFile(this.#path, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return "";
      throw err;
    });
    const end = text.lastIndexOf("\n") + 1;
    if (end < text.length) await truncate(this.#path, Buffer.byteLength(text.slice(0, end)));
    for (const raw of end === 0 ? [] : text.slice(0, end - 1).split("\n")) {
      const l = JSON.parse(raw) as Line;
      this.#push(l);
    }
    this.#fh = await open(this.#path, "a");
  }

  /** Adds entries for events a crash left out of the feed (per run: seqs after its last). */
  async recover(runs: Iterable<{ runId: string; tenantId: string; seq: number }>): Promise<void> {
    const last = new Map<string, number>();
    for (const e of this.#entries) last.set(e.runId, Math.max(last.get(e.runId) ?? 0, e.toSeq));
    const missing = [...runs]
      .filter((r) => r.seq > (last.get(r.runId) ?? 0))
      .sort((x, y) => (x.runId < y.runId ? -1 : 1));
    for (const r of missing)
      await this.add(r.runId, r.tenantId, (last.get(r.runId) ?? 0) + 1, r.seq);
  }

  /**
   * Appends one entry (durably when fsync is on); resolves once it is written. Readers see
   * an entry only once it is written: an id a reader saw always survives a crash.
   */
  add(runId: string, tenantId: string, fromSeq: number, toSeq: number): Promise<void> {
    const line: Line = { r: runId, t: tenantId, a: fromSeq, b: toSeq };
    const write = this.#chain.then(async () => {
      const fh = this.#fh;
      if (fh === undefined) throw new Error("the feed is not open");
      await fh.write(`${JSON.stringify(line)}\n`);
      if (this.#fsync) await fh.datasync();
      this.#push(line);
    });
    this.#chain = write.catch(() => undefined);
    return write;
  }

  read(from: string, limit: number): FeedEntry[] {
    const start = from === "" ? 0 : Number(from) - 1;
    if (!Number.isInteger(start) || start < 0) return [];
    return this.#entries.slice(start, start + Math.max(0, limit));
  }

  head(): string {
    return this.#entries[this.#entries.length - 1]?.id ?? "";
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#fh?.close();
    this.#fh = undefined;
  }

  #push(l: Line): void {
    this.#entries.push({
      id: String(this.#entries.length + 1),
      runId: l.r,
      tenantId: l.t,
      fromSeq: l.a,
      toSeq: l.b,
    });
  }
}
