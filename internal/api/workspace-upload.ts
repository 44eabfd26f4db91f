/**
 * CreateRun's workspace upload: the archive in the request is unpacked, checked and
 * re-packed as a stream (sandbox/workspace-stream.ts) straight into the artifact store,
 * under the server's limits, with at most a few unpacks at a time. Never holds the
 * unpacked archive in memory, and never leaves a blob behind for a refused archive (the
 * store makes a streamed blob visible only once complete).
 */
import { createContextKey } from "@connectrpc/connect";
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import { normaliseWorkspaceStream } from "../sandbox/workspace-stream.ts";
import { createSemaphore } from "./semaphore.ts";

/** The server's limits on uploaded workspaces. */
export interface WorkspaceLimits {
  /**
   * Largest unpacked archive, bytes: the tar after decompression, contents and headers
   * (`--max-workspace-bytes`). Default 256 MiB.
   */
  maxBytes: number;
  /** Most entries, counting implied parent directories (`--max-workspace-entries`). Default 100,000. */
  maxEntries: number;
  /**
   * Unpacks running at once in this server (`--max-concurrent-unpacks`); more wait for a
   * turn until their deadline. Default 2: each unpack keeps one libuv pool thread inflating
   * (4 by default, shared with every file write of the server) and the event loop hashing
   * and re-packing; two overlap one upload's inflate with the other's hashing on a 2-core
   * host, and leave pool threads for the artifact and event-log writes. More would not
   * finish uploads sooner, only slow every other request down.
   */
  maxConcurrentUnpacks: number;
}

export const DEFAULT_WORKSPACE_LIMITS: WorkspaceLimits = {
  maxBytes: 256 * 1024 * 1024,
  maxEntries: 100_000,
  maxConcurrentUnpacks: 2,
};

export interface WorkspaceUploader {
  /**
   * Checks the archive (tar or tar.gz), stores its normalised form and returns it.
   * Waits for an unpack slot first; `signal` (the call's deadline or cancellation) ends
   * the wait or the unpack, with its reason. Refusals name workspace_tar: EVALIDATION for
   * a bad archive, ETOOLARGE for a limit (naming it and its flag).
   */
  store(archive: Uint8Array, signal?: AbortSignal): Promise<ArtifactInfo>;
  /**
   * The same for an archive arriving in chunks (UploadWorkspace): never more than a chunk
   * in memory. The compressed stream is capped too (past the unpacked limit plus 1%):
   * bytes after the archive's end are not read forever.
   */
  storeStream(source: AsyncIterable<Uint8Array>, signal?: AbortSignal): Promise<ArtifactInfo>;
}

/** The server's uploader, set per call by the server (see internal/server/app.ts). */
export const kWorkspaceUploader = createContextKey<WorkspaceUploader | undefined>(undefined, {
  description: "workspace uploader",
});

export function createWorkspaceUploader(
  artifacts: ArtifactStore,
  limits: WorkspaceLimits = DEFAULT_WORKSPACE_LIMITS,
): WorkspaceUploader {
  const slots = createSemaphore(limits.maxConcurrentUnpacks);
  const archiveLimits = {
    // The request is capped already (--max-request-bytes); a second, hidden cap would
    // only surprise whoever raises that one.
    maxArchiveBytes: Number.MAX_SAFE_INTEGER,
    maxUnpackedBytes: limits.maxBytes,
    maxEntries: limits.maxEntries,
    settings: { unpackedBytes: "--max-workspace-bytes", entries: "--max-workspace-entries" },
  };
  const streamed = {
    ...archiveLimits,
    maxArchiveBytes: Math.ceil(limits.maxBytes * 1.01) + 1024 * 1024,
  };
  const run = async (
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    lim: typeof archiveLimits,
    signal: AbortSignal | undefined,
  ) => {
    const release = await slots.acquire(signal);
    try {
      return await artifacts.putStream(normaliseWorkspaceStream(source, lim), { signal });
    } finally {
      release();
    }
  };
  return {
    store: (archive, signal) => run([archive], archiveLimits, signal),
    storeStream: (source, signal) => run(source, streamed, signal),
  };
}
