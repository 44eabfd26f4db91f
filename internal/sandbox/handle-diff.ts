/**
 * SandboxHandle.diff for every adapter: the workspace, exported as a stream, against the
 * archive the sandbox started from (or the one given), as a git patch (workspace-diff.ts).
 * Must never: hold the base or the workspace whole in memory when a streamed base is given.
 */
import { AgentdError } from "../errors.ts";
import type { DiffOptions, WorkspaceDiff } from "./port.ts";
import { readWorkspaceArchive, SANDBOX_EXPORT_LIMITS } from "./workspace-archive.ts";
import { DEFAULT_MAX_PATCH_BYTES, diffWorkspace } from "./workspace-diff.ts";

export async function handleDiff(
  openExport: () => AsyncIterable<Uint8Array>,
  opts: DiffOptions,
  startedFrom: Uint8Array | undefined,
): Promise<WorkspaceDiff> {
  // A streamed base (the run's upload in the store) is scanned, never held.
  const baseTar = opts.base === undefined ? (opts.baseTar ?? startedFrom) : undefined;
  if (opts.base === undefined && baseTar === undefined) {
    throw new AgentdError(
      "EVALIDATION",
      "diff: no initial snapshot known for this sandbox; pass the base archive",
    );
  }
  const base =
    opts.base !== undefined
      ? opts.base.size === 0
        ? []
        : opts.base
      : baseTar === undefined || baseTar.byteLength === 0
        ? []
        : await readWorkspaceArchive(baseTar, SANDBOX_EXPORT_LIMITS);
  return diffWorkspace({
    base,
    openExport,
    maxPatchBytes: opts.maxPatchBytes ?? DEFAULT_MAX_PATCH_BYTES,
    ...(opts.redact === undefined ? {} : { redact: opts.redact }),
    ...(opts.signal === undefined ? {} : { signal: opts.signal }),
  });
}
