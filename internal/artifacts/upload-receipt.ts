/**
 * A tenant's receipt for an uploaded workspace: a content-addressed blob whose content names
 * the tenant and the workspace's digest, so CreateRun can check that the caller's tenant
 * uploaded what it names (api/upload-workspace.ts) and a deletion can remove it with the
 * workspace (lifecycle/delete-run.ts). Must never change: stored receipts are found by it.
 */
import { createHash } from "node:crypto";

/** The receipt blob's content. */
export const receiptOf = (tenantId: string, digest: string): Buffer =>
  Buffer.from(`agentd workspace upload receipt v1\0${tenantId}\0${digest}`);

/** The receipt blob's digest. */
export const receiptDigest = (tenantId: string, digest: string): string =>
  createHash("sha256").update(receiptOf(tenantId, digest)).digest("hex");
