/**
 * CreateRun's workspace upload: the archive in the request is unpacked, checked and
 * re-packed as a stream (sandbox/workspace-stream.ts) straight into the artifact store,
 * under the server's limits. An unpack slot is held per chunk of work (chunk-slots.ts),
 * never while a stream waits for its client; a tenant holds at most a few streams at once
 * (tenant-uploads.ts), and a stream that sends nothing for too long, or too little in each
 * window of that long, is cut (idle-cut.ts).
 * Never holds the unpacked archive in memory, and never leaves a blob behind for a refused
 * archive (the store makes a streamed blob visible only once complete).
 */
import { createContextKey } from "@connectrpc/connect";
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import { normaliseWorkspaceStream } from "../sandbox/workspace-stream.ts";
import { slotPerChunk } from "./chunk-slots.ts";
import { createFairSlots, type FairSlots } from "./fair-slots.ts";
import { cutWhenIdle } from "./idle-cut.ts";
import { createTenantUploads } from "./tenant-uploads.ts";

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
   * Chunks of unpack work running at once in this server (`--max-concurrent-unpacks`): a
   * slot is taken per chunk (a streamed upload gives it back while it waits for its
   * client), more wait for a turn, round-robin across the tenants waiting (fair-slots.ts), until their deadline. Default
   * 2: each unpack keeps one libuv pool thread inflating
   * (4 by default, shared with every file write of the server) and the event loop hashing
   * and re-packing; two overlap one upload's inflate with the other's hashing on a 2-core
   * host, and leave pool threads for the artifact and event-log writes. More would not
   * finish uploads sooner, only slow every other request down.
   */
  maxConcurrentUnpacks: number;
  /**
   * UploadWorkspace streams one tenant may hold open on this server at once
   * (`--max-uploads-per-tenant`); one more is refused with RESOURCE_EXHAUSTED. Default 4.
   */
  maxUploadsPerTenant: number;
  /**
   * Longest wait for an upload's next bytes, ms (`--upload-idle-ms`): past it the stream is
   * cut with DEADLINE_EXCEEDED and nothing is stored. Default 60,000.
   */
  uploadIdleMs: number;
  /**
   * Least bytes per second of waiting for the client, counted over each window of
   * uploadIdleMs (`--upload-min-bytes-per-s`): under it the stream is cut with
   * DEADLINE_EXCEEDED and nothing is stored; 0 is off. Default 16 KiB/s: a client on a
   * 1 Mbit/s link (about 122 KiB/s) passes with room to spare, and one that sends a byte
   * per idle period is cut after one window.
   */
  uploadMinBytesPerS: number;
}

export const DEFAULT_WORKSPACE_LIMITS: WorkspaceLimits = {
  maxBytes: 256 * 1024 * 1024,
  maxEntries: 100_000,
  maxConcurrentUnpacks: 2,
  maxUploadsPerTenant: 4,
  uploadIdleMs: 60_000,
  uploadMinBytesPerS: 16 * 1024,
};

/** How a streamed upload is run. */
export interface StreamOptions {
  /** The call's deadline or cancellation: ends a wait for a slot, or the unpack. */
  signal?: AbortSignal;
  /** The uploading tenant: its streams count against maxUploadsPerTenant. */
  tenantId: string;
  /**
   * The tenant's own limit on one upload's unpacked bytes (the auth file's
   * `tenants.<id>.limits.uploadBytes`): where it is below maxBytes it binds, and a refusal
   * names it instead of --max-workspace-bytes.
   */
  tenantMaxBytes?: number;
}

export interface WorkspaceUploader {
  /**
   * Checks the archive (tar or tar.gz, CreateRun's inline `workspace_tar`), stores its
   * normalised form and returns it. It takes one of the tenant's upload turns like a stream
   * (EBUSY naming --max-uploads-per-tenant past them), and is unpacked in chunks of
   * INLINE_CHUNK_BYTES, each with a slot of its own taken in the tenants' round-robin;
   * `signal` (the call's deadline or cancellation) ends a wait or the unpack, with its
   * reason. Refusals name workspace_tar: EVALIDATION for a bad archive, ETOOLARGE for a
   * limit (naming it and its flag).
   */
  store(archive: Uint8Array, opts: StreamOptions): Promise<ArtifactInfo>;
  /**
   * The same for an archive arriving in chunks (UploadWorkspace): never more than a chunk
   * in memory. The compressed stream is capped too (past the unpacked limit plus 1%):
   * bytes after the archive's end are not read forever. Refused at once (EBUSY, naming
   * --max-uploads-per-tenant) when the tenant holds its most streams; cut with
   * DEADLINE_EXCEEDED (naming --upload-idle-ms) when no bytes come for that long, or
   * (naming --upload-min-bytes-per-s) when a window of that long of waiting for the client
   * brought fewer bytes than the minimum rate. An empty chunk is no activity.
   */
  storeStream(source: AsyncIterable<Uint8Array>, opts: StreamOptions): Promise<ArtifactInfo>;
}

/** The server's uploader, set per call by the server (see internal/server/app.ts). */
export const kWorkspaceUploader = createContextKey<WorkspaceUploader | undefined>(undefined, {
  description: "workspace uploader",
});

/**
 * How much of an inline archive is unpacked per slot: what a streamed upload's message
 * usually carries (agentctl sends 1 MiB), so an inline archive waits its turn as often.
 */
export const INLINE_CHUNK_BYTES = 1024 * 1024;

/** `archive` as views of at most `size` bytes (no copy). */
export function* chunksOf(archive: Uint8Array, size = INLINE_CHUNK_BYTES): Generator<Uint8Array> {
  for (let at = 0; at < archive.byteLength; at += size) yield archive.subarray(at, at + size);
}

/**
 * The uploader of a server. `slots` are its unpack slots (default: fair slots of
 * limits.maxConcurrentUnpacks, round-robin across the tenants waiting, so one tenant's many
 * streams get one turn per round like another tenant's one); tests pass their own to see
 * the grants.
 */
export function createWorkspaceUploader(
  artifacts: ArtifactStore,
  limits: WorkspaceLimits = DEFAULT_WORKSPACE_LIMITS,
  slots: FairSlots = createFairSlots(limits.maxConcurrentUnpacks),
): WorkspaceUploader {
  const tenants = createTenantUploads(limits.maxUploadsPerTenant, "--max-uploads-per-tenant");
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
    serverLimits: typeof archiveLimits,
    { signal, tenantId, tenantMaxBytes }: StreamOptions,
  ) => {
    const lim =
      tenantMaxBytes !== undefined && tenantMaxBytes < serverLimits.maxUnpackedBytes
        ? {
            ...serverLimits,
            maxUnpackedBytes: tenantMaxBytes,
            settings: {
              ...serverLimits.settings,
              unpackedBytes: `tenants.${tenantId}.limits.uploadBytes`,
            },
          }
        : serverLimits;
    const turn = { acquire: (s?: AbortSignal) => slots.acquire(tenantId, s) };
    const paced = slotPerChunk(source, turn, signal);
    try {
      return await artifacts.putStream(normaliseWorkspaceStream(paced, lim), { signal });
    } catch (err) {
      // The call's end (deadline, cancel, a revoked token) is the reason, not what it broke
      // on its way through the unpack (a slot wait, a half-read archive).
      throw signal?.aborted === true ? signal.reason : err;
    } finally {
      // However the unpack ended, the slot of the chunk it was on goes back.
      void paced.return(undefined).catch(() => undefined);
    }
  };
  return {
    async store(archive, opts) {
      const release = tenants.take(opts.tenantId);
      try {
        return await run(chunksOf(archive), archiveLimits, opts);
      } finally {
        release();
      }
    },
    async storeStream(source, opts) {
      const release = tenants.take(opts.tenantId);
      let cut: unknown;
      try {
        const paced = cutWhenIdle(source, {
          idleMs: limits.uploadIdleMs,
          setting: "--upload-idle-ms",
          counts: (c) => c.byteLength > 0,
          minBytesPerS: limits.uploadMinBytesPerS,
          rateSetting: "--upload-min-bytes-per-s",
          size: (c) => c.byteLength,
          onCut: (err) => {
            cut = err;
          },
        });
        return await run(paced, streamed, opts);
      } catch (err) {
        // The cut is the reason, not the "truncated archive" the unpack saw after it.
        throw cut ?? err;
      } finally {
        release();
      }
    },
  };
}
