/**
 * ExportState for the embedded log (`agentd dev`): one JSON file per sink in
 * `<data-dir>/export/`, {cursor, dead}. The data directory is locked by one process, so the
 * lease is this process's: granted to one holder at a time, in memory. Files are replaced
 * atomically (write, rename).
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEAD_LETTERS_MAX, type DeadLetter, type ExportState } from "./state.ts";

interface SinkFile {
  cursor: string;
  dead: DeadLetter[];
}

export class FileExportState implements ExportState {
  readonly #dir: string;
  readonly #holders = new Map<string, { holder: string; until: number }>();
  #chain: Promise<unknown> = Promise.resolve();

  constructor(dir: string) {
    this.#dir = dir;
  }

  async lease(sink: string, holder: string, ttlMs: number): Promise<boolean> {
    const cur = this.#holders.get(sink);
    if (cur !== undefined && cur.holder !== holder && cur.until > Date.now()) return false;
    this.#holders.set(sink, { holder, until: Date.now() + ttlMs });
    return true;
  }

  async release(sink: string, holder: string): Promise<void> {
    if (this.#holders.get(sink)?.holder === holder) this.#holders.delete(sink);
  }

  async cursor(sink: string): Promise<string> {
    return (await this.#read(sink)).cursor;
  }

  async setCursor(sink: string, holder: string, cursor: string): Promise<boolean> {
    const cur = this.#holders.get(sink);
    if (cur?.holder !== holder || cur.until <= Date.now()) return false;
    await this.#update(sink, (f) => ({ ...f, cursor }));
    return true;
  }

  async deadLetter(sink: string, letter: DeadLetter): Promise<void> {
    await this.#update(sink, (f) => ({
      ...f,
      dead: [letter, ...f.dead].slice(0, DEAD_LETTERS_MAX),
    }));
  }

  async deadLetters(sink: string, limit: number): Promise<DeadLetter[]> {
    return (await this.#read(sink)).dead.slice(0, Math.max(0, limit));
  }

  #path(sink: string): string {
    return join(this.#dir, `${sink}.json`);
  }

  async #read(sink: string): Promise<SinkFile> {
    try {
      return JSON.parse(await readFile(this.#path(sink), "utf8")) as SinkFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { cursor: "", dead: [] };
      throw err;
    }
  }

  /** Read, change, write atomically; one change at a time. */
  #update(sink: string, change: (f: SinkFile) => SinkFile): Promise<void> {
    const next = this.#chain.then(async () => {
      await mkdir(this.#dir, { recursive: true });
      const f = change(await this.#read(sink));
      const tmp = `${this.#path(sink)}.tmp`;
      await writeFile(tmp, JSON.stringify(f), { flush: true });
      await rename(tmp, this.#path(sink));
    });
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
