/**
 * UploadWorkspace: a workspace archive of any size (within the server's workspace limits)
 * as a client stream of chunks, checked and stored as it arrives (workspace-upload.ts),
 * then an upload receipt for the tenant: CreateRun accepts `workspace_digest` only with the
 * caller tenant's receipt, until the receipt expires (`uploadReceiptTtlMs`). A live receipt
 * is a reference on the blob (lifecycle/port.ts UploadReceiptRefs): no deletion removes it. The receipt is itself a content-addressed blob (a digest of
 * tenant and workspace digest), so every server sees it and none can be forged by a
 * client.
 *
 * Must never: hold the archive in memory, store anything for an upload that stopped half
 * way, or let one tenant name another's workspace.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { ArtifactStore } from "../artifacts/port.ts";
import { receiptDigest, receiptOf } from "../artifacts/upload-receipt.ts";
import { AgentdError, invalid } from "../errors.ts";
import type {
  UploadWorkspaceRequest,
  UploadWorkspaceResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { DEFAULT_UPLOAD_RECEIPT_TTL_MS } from "../lifecycle/expire-receipts.ts";
import { holdWorkspace } from "../lifecycle/hold-blob.ts";
import type { UploadReceiptRefs } from "../lifecycle/port.ts";
import { principalOf } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { createWorkspaceUploader, kWorkspaceUploader } from "./workspace-upload.ts";

export function uploadWorkspaceHandler(deps: ApiDeps) {
  const fallbackUploader = createWorkspaceUploader(deps.artifacts);
  return async (
    reqs: AsyncIterable<UploadWorkspaceRequest>,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof UploadWorkspaceResponseSchema>> => {
    const principal = principalOf(ctx);
    const uploader = ctx.values.get(kWorkspaceUploader) ?? fallbackUploader;
    let chunks = 0;
    async function* bytes(): AsyncGenerator<Uint8Array> {
      for await (const r of reqs) {
        chunks++;
        yield r.chunk;
      }
    }
    const own = deps.tenantUploadBytes?.(principal.tenantId);
    const info = await uploader.storeStream(bytes(), {
      signal: ctx.signal,
      tenantId: principal.tenantId,
      ...(own === undefined ? {} : { tenantMaxBytes: own }),
    });
    if (chunks === 0) throw invalid("chunk", "the upload sent no bytes");
    // The receipt is a reference on the blob until it expires: a deletion of another run
    // (any tenant's) with the same content leaves the blob while the receipt lives.
    const receipts = deps.deletion?.store.receipts;
    if (receipts !== undefined)
      await holdWorkspace(
        receipts,
        deps.artifacts,
        principal.tenantId,
        info.digest,
        Date.now() + (deps.uploadReceiptTtlMs ?? DEFAULT_UPLOAD_RECEIPT_TTL_MS),
        "chunk",
      );
    await deps.artifacts.put(receiptOf(principal.tenantId, info.digest));
    await deps.tenantArtifacts?.charge(principal.tenantId, info.digest, info.size);
    return { digest: info.digest, sizeBytes: BigInt(info.size) };
  };
}

/** How long CreateRun's use of a receipt keeps it (and its blob) at least: the run's own
 * reference (its events) is in place long before. */
export const RECEIPT_USE_GRACE_MS = 10 * 60_000;

/**
 * The stored workspace `digest` names, when the tenant uploaded it and its receipt has not
 * expired; else NOT_FOUND. With `receipts` the receipt's reference decides (and is extended
 * past this CreateRun, so it cannot expire before the run's events name the blob); without
 * (in-process routers of tests), the receipt blob does.
 */
export async function uploadedWorkspace(
  artifacts: ArtifactStore,
  tenantId: string,
  digest: string,
  receipts?: UploadReceiptRefs,
): Promise<{ digest: string; size: number }> {
  if (!/^[0-9a-f]{64}$/.test(digest))
    throw invalid(
      "workspace_digest",
      "must be a sha256 (64 lowercase hex digits) from UploadWorkspace",
    );
  const now = Date.now();
  const [receipt, blob] = await Promise.all([
    receipts === undefined
      ? artifacts.stat(receiptDigest(tenantId, digest))
      : receipts.renew(tenantId, digest, now, now + RECEIPT_USE_GRACE_MS),
    artifacts.stat(digest),
  ]);
  if (receipt === undefined || receipt === false || blob === undefined)
    throw new AgentdError(
      "ENOTFOUND",
      `workspace_digest: no workspace of yours has digest ${digest} (upload it with UploadWorkspace first)`,
      { field: "workspace_digest" },
    );
  return { digest, size: blob.size };
}
