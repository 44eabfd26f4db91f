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
import type { SandboxHandle, WorkspaceDiff } from "../sandbox/port.ts";
import type { Drive } from "./drive.ts";
import { baseArchive } from "./run-artifacts.ts";

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
 * Called before each secret-carrying call, before anything of it (its first
 * `secret.written` included) is recorded: until a secret-carrying call is in the log, it
 * takes the diff of the workspace as it is (nothing of a secret in it yet) into
 * `patch-before-secret` (a drive that died between a capture and its call leaves an older
 * one: the last is the one that counts). A diff past limits.maxPatchSize is kept as a note
 * (text/plain) that run.completed repeats. A capture that fails fails the call.
 */
export async function captureBeforeSecret(d: Drive): Promise<void> {
  if (hadSecretCall(d)) return;
  const taken = await diffNow(d, d.box as SandboxHandle);
  const bytes = Buffer.from("patch" in taken ? taken.patch : `${taken.note}\n`, "utf8");
  if (bytes.length > 0) {
    const info = await d.deps.artifacts.put(bytes);
    await d.writer.append({
      case: "artifactEmitted",
      value: create(ArtifactEmittedSchema, {
        name: PATCH_BEFORE_SECRET,
        digest: info.digest,
        sizeBytes: BigInt(info.size),
        mediaType: "patch" in taken ? DIFF : NOTE,
      }),
    });
  }
  d.secretCalled = true;
}

const DIFF = "text/x-diff";
const NOTE = "text/plain";

/**
 * The workspace's diff against the run's upload, as the final patch is taken: capped at
 * limits.maxPatchSize (ETOOLARGE past it), the run's secret values masked.
 */
export async function diffAgainstUpload(d: Drive, box: SandboxHandle): Promise<WorkspaceDiff> {
  const base = await baseArchive(d.deps.artifacts, d.events);
  return box.diff({
    ...(base === undefined ? { baseTar: new Uint8Array() } : { base }),
    maxPatchBytes: d.deps.policy().limits.maxPatchSize,
    redact: (text) => d.writer.secrets.redactor.text(text),
    signal: d.cancel.signal,
  });
}

/** The workspace's diff against the upload, or why it is not kept (past the limit). */
async function diffNow(
  d: Drive,
  box: SandboxHandle,
): Promise<{ patch: string } | { note: string }> {
  const max = d.deps.policy().limits.maxPatchSize;
  try {
    return { patch: (await diffAgainstUpload(d, box)).patch };
  } catch (err) {
    if (!isAgentdError(err, "ETOOLARGE")) throw err;
    return {
      note: `the run's changes before its first secret-carrying call were larger than limits.maxPatchSize (${max} bytes): no patch was kept`,
    };
  }
}

/**
 * The patch taken before the first secret-carrying call: its digest, or why there is none
 * (`note`: it was too large); undefined when nothing had changed then.
 */
export function patchBeforeSecret(
  events: readonly Event[],
): { digest: string } | { noteDigest: string } | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case !== "artifactEmitted" || p.value.name !== PATCH_BEFORE_SECRET) continue;
    return p.value.mediaType === NOTE ? { noteDigest: p.value.digest } : { digest: p.value.digest };
  }
  return undefined;
}
