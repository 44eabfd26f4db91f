/**
 * DepCacheStore on a directory (worker flag --cache-dir): per tenant a folder named by the
 * sha256 of the tenant id (no tenant text in a path), holding `blobs/<digest>.tar` and
 * `keys/<key>.json` ({ digest, size, savedBy }) whose mtime is the entry's last use. Writes
 * go to a temporary name and are renamed, so a reader never sees a partial file; several
 * workers may share the folder (a race between two saves of one key leaves one of them,
 * both complete). Eviction: after a save, the tenant's entries by last use, oldest first,
 * until its blobs fit in maxBytes; a blob no key names any more is removed.
 *
 * Must never: name a path from tenant, key or digest text that is not a fixed-length hex
 * digest, or read or evict outside the tenant's own folder.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { AgentdError } from "../errors.ts";
import type { CacheEntry, CacheSaveResult, DepCacheStore } from "./port.ts";

const HEX64 = /^[0-9a-f]{64}$/;

export interface FsCacheStoreOptions {
  dir: string;
  /** Bytes of archives one tenant keeps at most (--cache-max-bytes). */
  maxBytes: number;
  now?: () => number;
}

export function createFsCacheStore(opts: FsCacheStoreOptions): DepCacheStore {
  const now = opts.now ?? Date.now;
  const tenantDir = (tenant: string) =>
    join(opts.dir, createHash("sha256").update(`tenant\0${tenant}`).digest("hex"));
  const checked = (what: string, v: string): string => {
    if (!HEX64.test(v)) throw new AgentdError("EVALIDATION", `${what}: not a sha256 hex digest`);
    return v;
  };
  const keyPath = (t: string, key: string) =>
    join(tenantDir(t), "keys", `${checked("key", key)}.json`);
  const blobPath = (t: string, d: string) =>
    join(tenantDir(t), "blobs", `${checked("digest", d)}.tar`);

  async function readEntry(t: string, key: string): Promise<CacheEntry | undefined> {
    try {
      const doc = JSON.parse(await readFile(keyPath(t, key), "utf8")) as Partial<CacheEntry>;
      if (typeof doc.digest !== "string" || !HEX64.test(doc.digest)) return undefined;
      return {
        key,
        digest: doc.digest,
        size: Number(doc.size ?? 0),
        savedBy: String(doc.savedBy ?? ""),
      };
    } catch {
      return undefined;
    }
  }

  async function atomicWrite(path: string, data: Uint8Array | string): Promise<void> {
    const tmp = `${path}.${randomUUID()}.tmp`;
    await writeFile(tmp, data);
    await rename(tmp, path);
  }

  /** The tenant's keys with their last use, oldest first. */
  async function entriesByUse(t: string): Promise<{ key: string; used: number }[]> {
    const dir = join(tenantDir(t), "keys");
    const names = await readdir(dir).catch(() => [] as string[]);
    const out: { key: string; used: number }[] = [];
    for (const n of names) {
      const key = n.endsWith(".json") ? n.slice(0, -5) : "";
      if (!HEX64.test(key)) continue;
      const s = await stat(join(dir, n)).catch(() => undefined);
      if (s !== undefined) out.push({ key, used: s.mtimeMs });
    }
    return out.sort((a, b) => a.used - b.used);
  }

  async function evict(t: string, keep: string): Promise<string[]> {
    const entries = await entriesByUse(t);
    const live = new Map<string, CacheEntry>();
    for (const e of entries) {
      const got = await readEntry(t, e.key);
      if (got !== undefined) live.set(e.key, got);
    }
    const sizes = new Map<string, number>();
    for (const e of live.values()) sizes.set(e.digest, e.size);
    let total = [...sizes.values()].reduce((a, b) => a + b, 0);
    const evicted: string[] = [];
    for (const e of entries) {
      if (total <= opts.maxBytes) break;
      const entry = live.get(e.key);
      if (e.key === keep || entry === undefined) continue;
      await rm(keyPath(t, e.key), { force: true });
      live.delete(e.key);
      evicted.push(e.key);
      if (![...live.values()].some((x) => x.digest === entry.digest)) {
        await rm(blobPath(t, entry.digest), { force: true });
        total -= entry.size;
      }
    }
    // Blobs no key names (an entry replaced by a newer save of its key).
    const named = new Set([...live.values()].map((e) => e.digest));
    const blobs = await readdir(join(tenantDir(t), "blobs")).catch(() => [] as string[]);
    for (const b of blobs) {
      const d = b.endsWith(".tar") ? b.slice(0, -4) : "";
      if (HEX64.test(d) && !named.has(d)) await rm(blobPath(t, d), { force: true });
    }
    return evicted;
  }

  return {
    maxBytes: opts.maxBytes,
    async lookup(tenant, key) {
      const e = await readEntry(tenant, key);
      if (e === undefined) return undefined;
      const at = new Date(now());
      await utimes(keyPath(tenant, key), at, at).catch(() => undefined);
      return e;
    },
    async read(tenant, digest) {
      try {
        const data = await readFile(blobPath(tenant, digest));
        // A blob that does not hash to its name is not served (a disk fault, a hand edit).
        if (createHash("sha256").update(data).digest("hex") !== digest) return undefined;
        return data;
      } catch {
        return undefined;
      }
    },
    async save(tenant, key, data, savedBy): Promise<CacheSaveResult> {
      checked("key", key);
      if (data.byteLength > opts.maxBytes)
        throw new AgentdError(
          "ETOOLARGE",
          `the cache archive is ${data.byteLength} bytes, past the tenant's cache bound of ${opts.maxBytes} (--cache-max-bytes)`,
        );
      const digest = createHash("sha256").update(data).digest("hex");
      const t = tenantDir(tenant);
      await mkdir(join(t, "blobs"), { recursive: true });
      await mkdir(join(t, "keys"), { recursive: true });
      await atomicWrite(blobPath(tenant, digest), data);
      const entry: CacheEntry = { key, digest, size: data.byteLength, savedBy };
      await atomicWrite(
        keyPath(tenant, key),
        JSON.stringify({ digest, size: entry.size, savedBy }),
      );
      const at = new Date(now());
      await utimes(keyPath(tenant, key), at, at).catch(() => undefined);
      const evicted = await evict(tenant, key);
      return { ...entry, evicted };
    },
  };
}
