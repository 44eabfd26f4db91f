/**
 * Holds that survive a new container. A paused run's snapshot leaves held paths out, and a
 * container rebuilt after a loss lacks what the held calls wrote: in the new container a
 * held path is absent by the restore's doing, not the run's, and "gone" must not end its
 * hold (which of the repository's files are missing would spell what the secret-carrying
 * call touched). So when a drive starts in a fresh container while the run holds paths,
 * each holding call's record is written again with every digest "unknown" (same paths, same
 * shape: nothing new is told) and no scan ever ends those holds (drive-start.ts).
 *
 * Must never: change which paths are held, or record a path the log did not hold.
 */
import { create } from "@bufbuild/protobuf";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { SecretFileSchema, SecretWrittenSchema } from "../gen/agentd/v1/events_pb.js";
import { type TaintedFile, UNKNOWN } from "./secret-taint.ts";

/** Makes every hold in `taint` permanent, recording each changed call's record by `append`. */
export async function keepHeldAfterRestore(
  taint: Map<string, TaintedFile> | undefined,
  append: (payload: EventPayload) => Promise<unknown>,
): Promise<void> {
  if (taint === undefined || taint.size === 0) return;
  const byCall = new Map<string, TaintedFile[]>();
  for (const f of taint.values()) byCall.set(f.callId, [...(byCall.get(f.callId) ?? []), f]);
  for (const [callId, files] of byCall) {
    if (files.every((f) => f.digest === UNKNOWN)) continue;
    const kept = files.map((f) => ({ ...f, digest: UNKNOWN }));
    await append({
      case: "secretWritten",
      value: create(SecretWrittenSchema, {
        callId,
        files: kept.map((f) =>
          create(SecretFileSchema, { path: f.path, digest: f.digest, before: f.before }),
        ),
      }),
    });
    for (const f of kept) taint.set(f.path, f);
  }
}
