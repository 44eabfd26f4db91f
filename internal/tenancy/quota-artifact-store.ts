/**
 * A run's artifact store under its tenant's `artifactBytes` limit: each blob the run stores
 * is charged to the tenant (once per tenant: artifact-bytes.ts); a write that finds the
 * tenant's stored bytes at or over the limit is refused with ELIMIT_ARTIFACTS naming the
 * limit, and the run fails with it (worker/run-driver.ts). So the write that crosses the
 * limit is stored, and the next one fails the run. Only the first refusal of a drive
 * throws: what the failure itself records (the answers of open calls) is stored.
 *
 * Must never: refuse a read, or refuse a write of a tenant whose limit is not set.
 */
import type { ArtifactInfo, ArtifactStore, PutStreamOptions } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import { artifactBytesOver, type TenantArtifactLedger } from "./artifact-bytes.ts";

export interface QuotaOptions {
  tenantId: string;
  ledger: TenantArtifactLedger;
  /** The tenant's limit now (published by the servers), undefined: none. */
  limitOf: () => Promise<number | undefined>;
}

/** `store` with the tenant's writes charged and checked. */
export function quotaArtifactStore(store: ArtifactStore, o: QuotaOptions): ArtifactStore {
  let refused = false;
  const check = async (): Promise<void> => {
    if (refused) return;
    const limit = await o.limitOf();
    if (limit === undefined) return;
    const used = await o.ledger.bytesOf(o.tenantId);
    if (used < limit) return;
    refused = true;
    throw new AgentdError("ELIMIT_ARTIFACTS", artifactBytesOver(o.tenantId, used, limit));
  };
  const charged = async (info: ArtifactInfo): Promise<ArtifactInfo> => {
    await o.ledger.charge(o.tenantId, info.digest, info.size);
    return info;
  };
  const wrapped: ArtifactStore = {
    put: async (data) => {
      await check();
      return charged(await store.put(data));
    },
    putStream: async (source: AsyncIterable<Uint8Array>, opts?: PutStreamOptions) => {
      await check();
      return charged(await store.putStream(source, opts));
    },
    stat: (d) => store.stat(d),
    read: (d, chunk) => store.read(d, chunk),
  };
  if (store.delete !== undefined) {
    const del = store.delete.bind(store);
    wrapped.delete = (d) => del(d);
  }
  return wrapped;
}
