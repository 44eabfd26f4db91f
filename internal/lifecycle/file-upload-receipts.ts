/**
 * Upload receipts as artifact references for the embedded log (`agentd dev`, one process):
 * a map of {digest}{tenant} to its expiry, kept in memory and written whole to a JSON file
 * (temp file, fsync, rename) on every change, so a restart keeps the references.
 * FileRunDeletion counts a digest with any receipt here as referenced.
 *
 * Must never: lose a receipt across a restart (the file is written before an answer), or
 * answer a blob free while a receipt on it is left.
 */
import { existsSync, readFileSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import type { ExpiredReceipt, UploadReceiptRefs } from "./port.ts";

export class FileUploadReceipts implements UploadReceiptRefs {
  readonly #path: string | undefined;
  /** `{digest}{tenant}` → expiry, ms. */
  readonly #live = new Map<string, number>();
  readonly #removing = new Set<string>();
  /** Writes go one after another: the file always holds a whole map. */
  #writing: Promise<void> = Promise.resolve();

  /** Whether any run's events name the digest (the embedded log's scan). */
  readonly #runsReference: (digest: string) => Promise<boolean>;

  /** `path` undefined: memory only (tests). A torn or foreign file is an error at start. */
  constructor(runsReference: (digest: string) => Promise<boolean>, path?: string) {
    this.#runsReference = runsReference;
    this.#path = path;
    if (path === undefined || !existsSync(path)) return;
    const o = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    for (const [k, v] of Object.entries(o))
      if (/^[0-9a-f]{64}/.test(k) && typeof v === "number") this.#live.set(k, v);
  }

  /** Whether any receipt (expired or not, until the sweep drops it) names `digest`. */
  references(digest: string): boolean {
    for (const k of this.#live.keys()) if (k.startsWith(digest)) return true;
    return false;
  }

  /** Whether the tenant holds a receipt on `digest` (expired or not, until swept). */
  heldBy(tenantId: string, digest: string): boolean {
    return this.#live.has(digest + tenantId);
  }

  /** A deletion found `digest` unreferenced: it is being removed. */
  markRemoving(digest: string): void {
    this.#removing.add(digest);
  }

  async hold(tenantId: string, digest: string, expiresAt: number): Promise<boolean> {
    const k = digest + tenantId;
    this.#live.set(k, Math.max(expiresAt, this.#live.get(k) ?? 0));
    await this.#save();
    return this.#removing.has(digest);
  }

  async release(holder: string, digest: string): Promise<boolean> {
    if (this.#live.delete(digest + holder)) await this.#save();
    const free = !this.references(digest) && !(await this.#runsReference(digest));
    if (free) this.#removing.add(digest);
    return free;
  }

  async removing(digest: string): Promise<boolean> {
    return this.#removing.has(digest);
  }

  async renew(tenantId: string, digest: string, now: number, until: number): Promise<boolean> {
    const k = digest + tenantId;
    const at = this.#live.get(k);
    if (at === undefined || at <= now) return false;
    if (at < until) {
      this.#live.set(k, until);
      await this.#save();
    }
    return true;
  }

  async expire(now: number, limit: number): Promise<ExpiredReceipt[]> {
    const due = [...this.#live].filter(([, at]) => at <= now).slice(0, limit);
    for (const [k] of due) this.#live.delete(k);
    const out = due.map(([k]) => ({ digest: k.slice(0, 64), tenantId: k.slice(64), free: false }));
    for (const r of out) {
      r.free = !this.references(r.digest) && !(await this.#runsReference(r.digest));
      if (r.free) this.#removing.add(r.digest);
    }
    if (due.length > 0) await this.#save();
    return out;
  }

  async removed(digests: readonly string[]): Promise<void> {
    for (const d of digests) this.#removing.delete(d);
  }

  /** Every tenant's receipt as [tenant, digest] (expired or not, until swept). */
  *entries(): Iterable<readonly [string, string]> {
    // Holders that are not tenants (a CreateRun's, a run's: NUL-led) are left out.
    for (const k of this.#live.keys())
      if (!k.slice(64).startsWith("\u0000")) yield [k.slice(64), k.slice(0, 64)] as const;
  }

  async tenantDigests(tenantId: string): Promise<string[]> {
    return [...this.#live.keys()]
      .filter((k) => k.slice(64) === tenantId)
      .map((k) => k.slice(0, 64));
  }

  #save(): Promise<void> {
    const path = this.#path;
    if (path === undefined) return Promise.resolve();
    const body = JSON.stringify(Object.fromEntries(this.#live));
    this.#writing = this.#writing
      .catch(() => undefined)
      .then(async () => {
        const tmp = `${path}.tmp`;
        const f = await open(tmp, "w");
        try {
          await f.writeFile(body);
          await f.sync();
        } finally {
          await f.close();
        }
        await rename(tmp, path);
      });
    return this.#writing;
  }
}
