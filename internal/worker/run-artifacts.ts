/**
 * The artifacts a run's events point at: the uploaded workspace (what the final patch is
 * computed against), the last workspace snapshot (what a paused run resumes from).
 * Must never: read either whole into memory (they stream from the store).
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { projectRun } from "../projections/run-projection.ts";
import type { WorkspaceSource } from "../sandbox/port.ts";

export const SNAPSHOT = "workspace-snapshot";
export const PATCH = "patch";

/**
 * The original workspace (the run's upload) as a source streamed from the store, never
 * read whole: every reader (the container's fill, the configuration, the kernel's index,
 * the final diff) opens its own read. Undefined when the run has no upload.
 */
export async function baseArchive(
  store: ArtifactStore,
  events: readonly Event[],
): Promise<WorkspaceSource | undefined> {
  const digest = projectRun("", events).workspaceDigest;
  if (!digest) return undefined;
  const info = await store.stat(digest);
  if (info === undefined)
    throw new AgentdError(
      "EIO",
      `the run's uploaded workspace ${digest} is missing from the store`,
    );
  return { size: info.size, open: () => store.read(digest) };
}

/** The digest of the last artifact called `name`, if any. */
export function lastArtifact(events: readonly Event[], name: string): string | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "artifactEmitted" && p.value.name === name) return p.value.digest;
  }
  return undefined;
}
