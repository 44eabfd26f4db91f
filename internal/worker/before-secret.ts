/**
 * The workspace as it was before the run's first secret-carrying call: what the final patch
 * carries, and why a paused run that had one keeps its container.
 *
 * A secret-carrying program decides which files it touches, and files it touched are held
 * (secret-taint.ts): any artifact that leaves out the held files and keeps the others tells
 * which ones it touched, one bit per file. So once such a call has run, no artifact is made
 * from the workspace at all: the final patch is the diff taken right before the first such
 * call (`patch-before-secret`, the run's changes up to then), and everything changed from
 * that call on is withheld; a pause keeps the container instead of taking a snapshot.
 * Whether a run had such a call is the person's approval and the model's call, never the
 * value's doing.
 *
 * Must never: take a diff or snapshot after a secret-carrying call has run, or read a
 * held file's content.
 */
import { create } from "@bufbuild/protobuf";
import { isAgentdError } from "../errors.ts";
import { ArtifactEmittedSchema, type Event } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import type { Drive } from "./drive.ts";
import { baseArchive, lastArtifact } from "./run-artifacts.ts";

/** The artifact holding the run's changes up to its first secret-carrying call. */
export const PATCH_BEFORE_SECRET = "patch-before-secret";

/** What run.completed says of the changes a run made from its first secret-carrying call on. */
export const WITHHELD_AFTER_SECRET = {
  path: "[changes from the first secret-carrying call on]",
  reason:
    "withheld: a call that carried a secret ran, and which files it changed could spell the secret; the patch holds the run's changes up to that call",
};

/** Whether a call that carried a secret has run (its `secret.written` is in the log). */
export function hadSecretCall(d: Pick<Drive, "events" | "secretCalled">): boolean {
  return d.secretCalled === true || d.events.some((e) => e.payload.case === "secretWritten");
}

/**
 * Called before each secret-carrying call: the first one of the run takes the diff of the
 * workspace as it is (nothing of a secret in it yet) into `patch-before-secret`. A diff
 * past limits.maxPatchSize is not kept (the final patch is then empty; the withheld note
 * says why). Later calls do nothing.
 */
export async function captureBeforeSecret(d: Drive): Promise<void> {
  if (hadSecretCall(d) || lastArtifact(d.events, PATCH_BEFORE_SECRET) !== undefined) {
    d.secretCalled = true;
    return;
  }
  d.secretCalled = true;
  const patch = await diffNow(d, d.box as SandboxHandle);
  if (patch === "") return;
  const info = await d.deps.artifacts.put(Buffer.from(patch, "utf8"));
  await d.writer.append({
    case: "artifactEmitted",
    value: create(ArtifactEmittedSchema, {
      name: PATCH_BEFORE_SECRET,
      digest: info.digest,
      sizeBytes: BigInt(info.size),
      mediaType: "text/x-diff",
    }),
  });
}

/** The workspace's diff against the upload ("" when too large: ETOOLARGE is not the call's). */
async function diffNow(d: Drive, box: SandboxHandle): Promise<string> {
  try {
    const base = await baseArchive(d.deps.artifacts, d.events);
    const diff = await box.diff({
      ...(base === undefined ? { baseTar: new Uint8Array() } : { base }),
      maxPatchBytes: d.deps.policy().limits.maxPatchSize,
      redact: (text) => d.writer.secrets.redactor.text(text),
      signal: d.cancel.signal,
    });
    return diff.patch;
  } catch (err) {
    if (isAgentdError(err, "ETOOLARGE")) return "";
    throw err;
  }
}

/** The digest and size of the patch taken before the first secret-carrying call, if any. */
export function patchBeforeSecret(events: readonly Event[]): string | undefined {
  return lastArtifact(events, PATCH_BEFORE_SECRET);
}
