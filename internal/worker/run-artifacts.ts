/**
 * The artifacts a run's events point at: the uploaded workspace (what the final patch is
 * computed against), the last workspace snapshot (what a paused run resumes from).
 * Must never: read a snapshot whole into memory (it streams into the container).
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { projectRun } from "../projections/run-projection.ts";

export const SNAPSHOT = "workspace-snapshot";
export const PATCH = "patch";

/** The original workspace: bounded by the upload limits, so it is read into memory. */
export async function baseArchive(
  store: ArtifactStore,
  events: readonly Event[],
): Promise<Uint8Array> {
  const digest = projectRun("", events).workspaceDigest;
  return digest ? readAll(store, digest) : new Uint8Array();
}

/** The digest of the last artifact called `name`, if any. */
export function lastArtifact(events: readonly Event[], name: string): string | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "artifactEmitted" && p.value.name === name) return p.value.digest;
  }
  return undefined;
}

async function readAll(store: ArtifactStore, digest: string): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of store.read(digest)) parts.push(c);
  return Buffer.concat(parts);
}
