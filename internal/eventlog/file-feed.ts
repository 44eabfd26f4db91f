/**
 * The embedded log's log-wide feed (see EventLog.readFeed): one line per applied commit in
 * `feed.ndjson` ({r: run, t: tenant, a: first seq, b: last seq}); an entry's id is its line
 * number. Lines are written in id order, after the run's own write and before the append is
 * acknowledged (a feed that cannot be written stops the log: no id may move). After a crash,
 * the events no line covers are added at load (recover): the feed covers every stored event. Must never: rewrite a line but a
 * torn last one, or give two entries one id.
 */
import { type FileHandle, open, readFile, truncate } from "node:fs/promises";
import type { FeedEntry } from "./port.ts";

interface Line {
  r: string;
  t: string;
  a: number;
  b: number;
  /** A notice's own event (run.deleted, tenant.purged): no run log holds it. */
  e?: string;
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
    for (const raw of end === 0 ? [] : text.slice(0, end - 1).split("\n")) this.#push(lineOf(raw));
    this.#fh = await open(this.#path, "a");
  }

  /**
   * Adds entries for the events a crash (or a failed feed write) left out of the feed: per
   * run, every range of seqs no entry covers, after everything else, in run id order.
   */
  async recover(runs: Iterable<{ runId: string; tenantId: string; seq: number }>): Promise<void> {
    const covered = new Map<string, [number, number][]>();
    for (const e of this.#entries) {
      if (e.event !== undefined) continue;
      const list = covered.get(e.runId) ?? [];
      list.push([e.fromSeq, e.toSeq]);
      covered.set(e.runId, list);
    }
    const sorted = [...runs].sort((x, y) => (x.runId < y.runId ? -1 : 1));
    for (const r of sorted)
      for (const [a, b] of holes(covered.get(r.runId) ?? [], r.seq))
        await this.add(r.runId, r.tenantId, a, b);
  }

  /**
   * Appends one entry (durably when fsync is on); resolves once it is written. Readers see
   * an entry only once it is written: an id a reader saw always survives a crash.
   */
  add(
    runId: string,
    tenantId: string,
    fromSeq: number,
    toSeq: number,
    event?: string,
  ): Promise<void> {
    const line: Line = { r: runId, t: tenantId, a: fromSeq, b: toSeq };
    if (event !== undefined) line.e = event;
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
    const entry: FeedEntry = {
      id: String(this.#entries.length + 1),
      runId: l.r,
      tenantId: l.t,
      fromSeq: l.a,
      toSeq: l.b,
    };
    if (typeof l.e === "string") entry.event = l.e;
    this.#entries.push(entry);
  }
}

/** The ranges of 1..last that no range of `have` covers. */
function holes(have: [number, number][], last: number): [number, number][] {
  const out: [number, number][] = [];
  let next = 1;
  for (const [a, b] of [...have].sort((x, y) => x[0] - y[0])) {
    if (a > next) out.push([next, Math.min(a - 1, last)]);
    next = Math.max(next, b + 1);
  }
  if (next <= last) out.push([next, last]);
  return out.filter(([a, b]) => a <= b);
}

/** A stored line; one that does not parse keeps its id and covers nothing (recover fills in). */
function lineOf(raw: string): Line {
  try {
    const l = JSON.parse(raw) as Partial<Line>;
    if (
      typeof l.r === "string" &&
      typeof l.t === "string" &&
      Number.isInteger(l.a) &&
      Number.isInteger(l.b) &&
      (l.e === undefined || typeof l.e === "string")
    )
      return l as Line;
  } catch {
    // below
  }
  return { r: "", t: "", a: 1, b: 0 };
}
