/**
 * Policy changes of the embedded event log (`agentd dev`): a map in this process (the one
 * process that owns the log), each change appended as one JSON line to
 * `policy-changes.jsonl` in the log's directory and fsynced before it is answered, so
 * changes survive a restart. The file is rewritten compactly when it is opened. Without a
 * path: memory only (in-process routers of tests).
 *
 * Must never: answer before the line is on disk, or load a malformed line as a change.
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from "node:fs";
import { appendFile, open } from "node:fs/promises";
import { dirname } from "node:path";
import {
  type PolicyChangeStore,
  parseStored,
  type Settlement,
  type StoredPolicyChange,
  settled,
} from "./port.ts";

export class FilePolicyChangeStore implements PolicyChangeStore {
  readonly #path: string | undefined;
  readonly #changes = new Map<string, StoredPolicyChange>();
  #chain: Promise<unknown> = Promise.resolve();

  constructor(opts: { path?: string } = {}) {
    this.#path = opts.path;
    if (this.#path !== undefined) this.#load(this.#path);
  }

  #load(path: string): void {
    mkdirSync(dirname(path), { recursive: true });
    let text = "";
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    for (const line of text.split("\n")) {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        continue; // a torn last line of a crash, or garbage: never a change
      }
      const c = parseStored(v);
      if (c !== undefined) this.#changes.set(c.id, c);
    }
    this.#compact(path);
  }

  /** Writes the file anew from the map (a temporary file, fsynced, renamed over it). */
  #compact(path: string): void {
    const all = [...this.#changes.values()].map((c) => `${JSON.stringify(c)}\n`).join("");
    const fd = openSync(`${path}.tmp`, "w");
    try {
      writeFileSync(fd, all);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(`${path}.tmp`, path);
  }

  /** Runs `fn` after every earlier change, then persists the change it made. */
  #change<T>(fn: () => { result: T; write?: StoredPolicyChange }): Promise<T> {
    const next = this.#chain.then(async () => {
      const { result, write } = fn();
      if (write !== undefined && this.#path !== undefined) {
        await appendFile(this.#path, `${JSON.stringify(write)}\n`);
        const fh = await open(this.#path, "r");
        try {
          await fh.datasync();
        } finally {
          await fh.close();
        }
      }
      return result;
    });
    this.#chain = next.catch(() => undefined);
    return next;
  }

  propose(c: StoredPolicyChange): Promise<StoredPolicyChange> {
    return this.#change(() => {
      const held = this.#changes.get(c.id);
      if (held !== undefined) return { result: { ...held } };
      this.#changes.set(c.id, { ...c });
      return { result: { ...c }, write: c };
    });
  }

  async get(id: string): Promise<StoredPolicyChange | undefined> {
    await this.#chain;
    const c = this.#changes.get(id);
    return c === undefined ? undefined : { ...c };
  }

  async list(tenantId: string | undefined, limit = 500): Promise<StoredPolicyChange[]> {
    await this.#chain;
    return [...this.#changes.values()]
      .filter((c) => tenantId === undefined || c.tenantId === tenantId)
      .sort((a, b) => b.proposedAt - a.proposedAt || (a.id < b.id ? 1 : -1))
      .slice(0, limit)
      .map((c) => ({ ...c }));
  }

  settle(id: string, s: Settlement): Promise<StoredPolicyChange | undefined> {
    return this.#change(() => {
      const c = this.#changes.get(id);
      if (c === undefined || c.state !== "pending") return { result: undefined };
      const next = settled(c, s);
      this.#changes.set(id, next);
      return { result: { ...next }, write: next };
    });
  }

  dropTenant(tenantId: string): Promise<number> {
    return this.#change(() => {
      const ids = [...this.#changes.values()].filter((c) => c.tenantId === tenantId);
      for (const c of ids) this.#changes.delete(c.id);
      if (ids.length > 0 && this.#path !== undefined) this.#compact(this.#path);
      return { result: ids.length };
    });
  }

  reopen(id: string, s: Settlement): Promise<boolean> {
    return this.#change(() => {
      const c = this.#changes.get(id);
      if (c === undefined || c.state !== s.state || c.settledBy !== s.by || c.settledAt !== s.at)
        return { result: false };
      const { settledAt: _a, settledBy: _b, reason: _r, oldDigest: _o, newDigest: _n, ...rest } = c;
      const next: StoredPolicyChange = { ...rest, state: "pending" };
      this.#changes.set(id, next);
      return { result: true, write: next };
    });
  }
}
