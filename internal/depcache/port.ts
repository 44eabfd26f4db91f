/**
 * Dependency caches (issue #24): archives of a sandbox's /cache as a run's setup step left
 * it, kept per tenant under a key (cache-key.ts) so a later run of the same repository and
 * lockfile starts its setup from them. Content-addressed: an entry is its archive's sha256,
 * and a run restores a digest, never "whatever the key holds now" without recording it.
 *
 * Must never: let one tenant read, list or evict another tenant's entries, or grow a
 * tenant's archives past its bound.
 */

/** One key's entry: the archive it names and the run that saved it. */
export interface CacheEntry {
  key: string;
  /** sha256 (hex) of the archive. */
  digest: string;
  size: number;
  /** The run whose setup saved it. */
  savedBy: string;
}

export interface CacheSaveResult extends CacheEntry {
  /** Keys of the tenant removed to stay within its bound, oldest use first. */
  evicted: string[];
}

export interface DepCacheStore {
  /** The key's entry (its use is noted for eviction), or undefined. */
  lookup(tenant: string, key: string): Promise<CacheEntry | undefined>;
  /** The archive of a digest the tenant holds; undefined when gone (evicted). */
  read(tenant: string, digest: string): Promise<Uint8Array | undefined>;
  /**
   * Stores `data` as the key's entry and evicts the tenant's least recently used entries
   * past its bound (never the one just saved). ETOOLARGE when `data` alone is past it.
   */
  save(tenant: string, key: string, data: Uint8Array, savedBy: string): Promise<CacheSaveResult>;
  /** The most bytes of archives one tenant keeps. */
  readonly maxBytes: number;
}
