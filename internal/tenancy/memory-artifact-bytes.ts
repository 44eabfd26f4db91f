/**
 * TenantArtifactLedger in one process (`agentd dev` on the embedded log, tests): the same
 * answers as the Redis ledger, rebuilt from nothing at start. Must never: be shared by
 * processes (each would count alone).
 */
import type { TenantArtifactLedger } from "./artifact-bytes.ts";

export class MemoryArtifactLedger implements TenantArtifactLedger {
  /** tenant → digest → size. */
  readonly #blobs = new Map<string, Map<string, number>>();

  async charge(tenantId: string, digest: string, size: number): Promise<number> {
    const m = this.#blobs.get(tenantId) ?? new Map<string, number>();
    this.#blobs.set(tenantId, m);
    if (!m.has(digest)) m.set(digest, size);
    return this.bytesOf(tenantId);
  }

  async release(tenantId: string, digest: string): Promise<void> {
    this.#blobs.get(tenantId)?.delete(digest);
  }

  async bytesOf(tenantId: string): Promise<number> {
    let n = 0;
    for (const s of this.#blobs.get(tenantId)?.values() ?? []) n += s;
    return n;
  }
}
