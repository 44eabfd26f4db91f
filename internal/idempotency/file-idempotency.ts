/**
 * Idempotency keys of the embedded event log (`agentd dev`): a map in this process (the
 * one process that owns the log), each change appended to `idempotency.jsonl` in the log's
 * directory and fsynced before the claim is answered, so keys survive a restart. The file
 * is rewritten with the live claims only when it is opened. Without a path: memory only
 * (in-process routers of tests).
 *
 * Must never: answer a claim before it is on disk, or load an expired or malformed line.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { appendFile, open } from "node:fs/promises";
import { dirname } from "node:path";
import { IDEMPOTENCY_TTL_MS, type IdempotencyClaim, type IdempotencyStore } from "./port.ts";

type Line = { k: string; c: IdempotencyClaim | null };

export class FileIdempotencyStore implements IdempotencyStore {
  readonly #path: string | undefined;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #claims = new Map<string, IdempotencyClaim>();
  #chain: Promise<unknown> = Promise.resolve();

  constructor(opts: { path?: string; ttlMs?: number; now?: () => number } = {}) {
    this.#path = opts.path;
    this.#ttlMs = opts.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.#now = opts.now ?? Date.now;
    if (this.#path !== undefined) this.#load(this.#path);
  }

  #key(tenantId: string, key: string): string {
    return createHash("sha256").update(tenantId).update("\0").update(key).digest("hex");
  }

  #live(k: string): IdempotencyClaim | undefined {
    const c = this.#claims.get(k);
    if (c !== undefined && this.#now() - c.at >= this.#ttlMs) this.#claims.delete(k);
    return this.#claims.get(k);
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
      let l: Line;
      try {
        l = JSON.parse(line) as Line;
      } catch {
        continue; // a torn last line of a crash, or garbage: never a claim
      }
      if (typeof l?.k !== "string") continue;
      const c = l.c;
      if (c === null) this.#claims.delete(l.k);
      else if (
        typeof c?.runId === "string" &&
        typeof c.digest === "string" &&
        Number.isFinite(c.at)
      )
        this.#claims.set(
          l.k,
          c.deleted === true
            ? { runId: "", digest: "", at: c.at, deleted: true }
            : { runId: c.runId, digest: c.digest, at: c.at },
        );
    }
    for (const k of [...this.#claims.keys()]) this.#live(k);
    const live = [...this.#claims].map(([k, c]) => `${JSON.stringify({ k, c })}\n`).join("");
    writeFileSync(`${path}.tmp`, live);
    renameSync(`${path}.tmp`, path);
  }

  /** Runs `fn` after every earlier change, then persists its line. */
  #change<T>(fn: () => { result: T; line?: Line }): Promise<T> {
    const next = this.#chain.then(async () => {
      const { result, line } = fn();
      if (line !== undefined && this.#path !== undefined) {
        await appendFile(this.#path, `${JSON.stringify(line)}\n`);
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

  claim(tenantId: string, key: string, c: { runId: string; digest: string }) {
    const k = this.#key(tenantId, key);
    return this.#change(() => {
      const held = this.#live(k);
      if (held !== undefined) return { result: { ...held } as IdempotencyClaim | undefined };
      const claim = { runId: c.runId, digest: c.digest, at: this.#now() };
      this.#claims.set(k, claim);
      return { result: undefined, line: { k, c: claim } };
    });
  }

  replace(
    tenantId: string,
    key: string,
    prevRunId: string,
    next: { runId: string; digest: string },
  ): Promise<boolean> {
    const k = this.#key(tenantId, key);
    return this.#change(() => {
      if (this.#live(k)?.runId !== prevRunId) return { result: false };
      const claim = { runId: next.runId, digest: next.digest, at: this.#now() };
      this.#claims.set(k, claim);
      return { result: true, line: { k, c: claim } };
    });
  }

  forgetRun(_tenantId: string, runId: string): Promise<void> {
    return this.#change(() => {
      for (const [k, c] of this.#claims) {
        if (c.runId !== runId || this.#live(k) === undefined) continue;
        const claim = { runId: "", digest: "", at: c.at, deleted: true };
        this.#claims.set(k, claim);
        return { result: undefined, line: { k, c: claim } };
      }
      return { result: undefined };
    });
  }

  release(tenantId: string, key: string, runId: string): Promise<void> {
    const k = this.#key(tenantId, key);
    return this.#change(() => {
      if (this.#live(k)?.runId !== runId) return { result: undefined };
      this.#claims.delete(k);
      return { result: undefined, line: { k, c: null } };
    });
  }
}
