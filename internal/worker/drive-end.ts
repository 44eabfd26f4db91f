/**
 * How a drive ends: completed (the final patch, then `run.completed`), failed (a typed
 * error), cancelled (every process killed, the container gone, then `run.cancelled`),
 * ended elsewhere (the log refused an append: someone else ended the run), or released
 * (the worker stops; the container stays for the next owner; or its container was lost:
 * the next drive recovers it). Must never: append a
 * terminal event while a process of the run may still be running (invariant 8), or after
 * the run ended (the log refuses it; this is where that refusal is handled), or leave a
 * call of the run without its tool.result (open-calls.ts).
 */
import { create } from "@bufbuild/protobuf";
import { isAgentdError } from "../errors.ts";
import {
  ArtifactEmittedSchema,
  PatchOmissionSchema,
  RunCancelledSchema,
  type RunCompleted,
  RunCompletedSchema,
  RunFailedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { projectRun } from "../projections/run-projection.ts";
import type { SandboxHandle, WorkspaceDiff } from "../sandbox/port.ts";
import {
  diffAgainstUpload,
  hadSecretCall,
  patchBeforeSecret,
  WITHHELD_AFTER_SECRET,
} from "./before-secret.ts";
import type { Drive } from "./drive.ts";
import { settleEgress } from "./drive-egress.ts";
import { boxLost } from "./drive-lost.ts";
import { costOf, usageOf } from "./drive-usage.ts";
import { answerOpenCalls } from "./open-calls.ts";
import { PATCH } from "./run-artifacts.ts";
import type { DriveOutcome, Next } from "./run-driver.ts";

/**
 * The final patch as an artifact, then run.completed; the container goes. Every process is
 * killed first: the workspace must not change between the diff's two reads.
 */
export async function complete(d: Drive, summary: string): Promise<Next> {
  const box = d.box as SandboxHandle;
  // A lost container's workspace is not the run's: the patch must not be taken from a
  // replacement nobody recovered. The next drive recovers it, and the model is asked again.
  if (await boxLost(d)) return { to: "release" };
  await box.killAll();
  const final = hadSecretCall(d) ? await patchBeforeSecretCall(d) : await finalDiff(d, box);
  if ("fail" in final) return fail(d, final.fail.code, final.fail.message);
  await settleEgress(d);
  await d.writer.append({
    case: "runCompleted",
    value: create(RunCompletedSchema, {
      summary: summary.slice(0, 16 * 1024),
      usage: usageOf(d),
      costMicros: BigInt(costOf(d)),
      ...final,
    }),
  });
  await box.destroy();
  return { done: "completed" };
}

/** run.completed's patch fields, or the failure the final diff met. */
type FinalPatch =
  | Pick<
      RunCompleted,
      "patchDigest" | "patchRedacted" | "patchRedactedFiles" | "patchOmitted" | "patchIgnored"
    >
  | { fail: { code: string; message: string } };

/**
 * The final patch of a run no secret-carrying call ran in: the workspace's diff against
 * the upload, emitted as the `patch` artifact. Changes larger than limits.maxPatchSize
 * fail the run (ETOOLARGE naming the limit).
 */
async function finalDiff(d: Drive, box: SandboxHandle): Promise<FinalPatch> {
  let diff: WorkspaceDiff;
  try {
    diff = await diffAgainstUpload(d, box);
  } catch (err) {
    if (isAgentdError(err, "ETOOLARGE")) return { fail: { code: err.code, message: err.message } };
    throw err;
  }
  let patchDigest = "";
  if (diff.patch !== "") {
    const info = await d.deps.artifacts.put(Buffer.from(diff.patch, "utf8"));
    patchDigest = info.digest;
    await emitPatch(d, info.digest, info.size);
  }
  return {
    patchDigest,
    patchRedacted: diff.redactedFiles.length > 0,
    patchRedactedFiles: diff.redactedFiles.slice(0, 1000),
    patchOmitted: diff.omitted.slice(0, 1000).map((o) => create(PatchOmissionSchema, o)),
    patchIgnored: diff.ignored,
  };
}

/**
 * The final patch of a run a secret-carrying call ran in (before-secret.ts): the diff
 * taken right before the first one, and one omission for everything from it on. No diff
 * of the workspace now: which of its files are held would spell the secret.
 */
async function patchBeforeSecretCall(d: Drive): Promise<FinalPatch> {
  await d.refresh(); // this drive's own capture is read back from the log
  const taken = patchBeforeSecret(d.events);
  const omitted = [create(PatchOmissionSchema, WITHHELD_AFTER_SECRET)];
  if (taken !== undefined && "noteDigest" in taken)
    omitted.push(
      create(PatchOmissionSchema, {
        path: "[changes before the first secret-carrying call]",
        reason: await noteOf(d, taken.noteDigest),
      }),
    );
  const digest = taken !== undefined && "digest" in taken ? taken.digest : undefined;
  const info = digest === undefined ? undefined : await d.deps.artifacts.stat(digest);
  if (digest !== undefined && info !== undefined) await emitPatch(d, digest, info.size);
  return {
    patchDigest: info === undefined ? "" : (digest ?? ""),
    patchRedacted: true,
    patchRedactedFiles: [],
    patchOmitted: omitted,
    patchIgnored: 0,
  };
}

/** The text of a capture's note (a few hundred bytes), or a fallback when it is gone. */
async function noteOf(d: Drive, digest: string): Promise<string> {
  const chunks: Buffer[] = [];
  try {
    for await (const c of d.deps.artifacts.read(digest)) chunks.push(Buffer.from(c));
  } catch {
    return "the run's changes before its first secret-carrying call were not kept";
  }
  return Buffer.concat(chunks).toString("utf8").trim().slice(0, 1000);
}

/** The `patch` artifact's event. */
async function emitPatch(d: Drive, digest: string, size: number): Promise<void> {
  await d.writer.append({
    case: "artifactEmitted",
    value: create(ArtifactEmittedSchema, {
      name: PATCH,
      digest,
      sizeBytes: BigInt(size),
      mediaType: "text/x-diff",
    }),
  });
}

/**
 * run.failed with a typed error; the container goes (a takeover that failed before its start
 * found the container: the previous owner's), then every call still open gets its result.
 */
export async function fail(d: Drive, code: string, message: string): Promise<Next> {
  // Nothing of the run may still run when its end (or a call's answer) is written.
  const box = d.box ?? (await d.deps.sandbox.find(d.runId));
  await box?.destroy();
  await answerOpenCalls(d, "interrupted", `the run failed (${code})`);
  await d.writer.append({
    case: "runFailed",
    value: create(RunFailedSchema, {
      error: { code, message },
      usage: usageOf(d),
      costMicros: BigInt(costOf(d)),
    }),
  });
  return { done: "failed" };
}

/**
 * Cancelled: the running call was killed by the cancel signal (the kernel recorded it);
 * the container goes with everything in it, then every call still open gets its result (a
 * call a dead owner started: `interrupted`; one that never started: `cancelled`), then
 * run.cancelled.
 */
export async function cancel(d: Drive): Promise<Next> {
  // A takeover cancelled before its start found the container: the previous owner's may
  // still run a call, and goes with everything in it.
  const box = d.box ?? (await d.deps.sandbox.find(d.runId));
  await box?.destroy();
  // Also reads the request, if the watch saw it first.
  await answerOpenCalls(d, "cancelled", "the run was cancelled");
  const req = [...d.events].reverse().find((e) => e.payload.case === "runCancelRequested");
  const by = req?.payload.case === "runCancelRequested" ? req.payload.value : undefined;
  await d.writer.append({
    case: "runCancelled",
    value: create(RunCancelledSchema, {
      reason: by?.reason ?? "the worker was stopped",
      cancelledBy: by?.requestedBy ?? d.deps.workerId,
    }),
  });
  return { done: "cancelled" };
}

/** The run ended without this drive (the log refused an append): the container goes. */
export async function endedElsewhere(d: Drive): Promise<DriveOutcome> {
  await d.box?.destroy();
  await d.refresh().catch(() => undefined);
  return outcomeOf(projectRun(d.runId, d.events).state);
}

/** The outcome of a drive that found its run ended (`state` is terminal). */
export function outcomeOf(state: RunState): DriveOutcome {
  if (state === RunState.COMPLETED) return "completed";
  return state === RunState.CANCELLED ? "cancelled" : "failed";
}
