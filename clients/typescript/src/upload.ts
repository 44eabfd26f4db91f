/**
 * How a workspace archive reaches the server: up to INLINE_WORKSPACE_MAX inside CreateRun,
 * larger ones streamed first with UploadWorkspace (1 MiB messages) and named by digest.
 * Used by AgentdClient and agentctl alike.
 */
import type { RunClient } from "./transport.ts";

/** Archives up to this size travel inside CreateRun; larger ones are streamed first. */
export const INLINE_WORKSPACE_MAX = 4 * 1024 * 1024;
const CHUNK = 1024 * 1024;

export async function sendWorkspace(
  rpc: RunClient,
  archive: Uint8Array,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<{ workspaceTar: Uint8Array } | { workspaceDigest: string }> {
  if (archive.byteLength <= INLINE_WORKSPACE_MAX) return { workspaceTar: archive };
  async function* chunks() {
    for (let at = 0; at < archive.byteLength; at += CHUNK)
      yield { chunk: archive.subarray(at, Math.min(at + CHUNK, archive.byteLength)) };
  }
  return { workspaceDigest: (await rpc.uploadWorkspace(chunks(), opts)).digest };
}
