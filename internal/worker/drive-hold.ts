/**
 * A run waiting for a person. The drive first holds it (the run keeps its worker, lease and
 * container, following the log) for up to `approvalHoldMs`; resolved in time, the run
 * resumes in place with a compare-and-append of `run.resumed` (a CancelRun landing
 * meanwhile wins). Otherwise it pauses for real: the workspace goes to a snapshot artifact
 * and the container away, so a paused run holds no worker. Must never: resume over a
 * cancel or an end, or keep a container for a run that no worker holds.
 */
import { create } from "@bufbuild/protobuf";
import { isAgentdError } from "../errors.ts";
import { ArtifactEmittedSchema, RunResumedSchema } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { isTerminal, projectRun } from "../projections/run-projection.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { metrics } from "../telemetry/metrics.ts";
import { hadSecretCall } from "./before-secret.ts";
import type { Drive } from "./drive.ts";
import { boxLost } from "./drive-lost.ts";
import { lastResolvedApproval } from "./drive-start.ts";
import { SNAPSHOT } from "./run-artifacts.ts";
import type { Next } from "./run-driver.ts";
import { snapshotWorkspace } from "./workspace-snapshot.ts";

/** Holds the run while its approval waits; where it goes when that ends. */
export async function hold(d: Drive): Promise<Next> {
  // The time held is not counted against the wall budget: the log's run.paused and
  // run.resumed bound it (run-counts.ts), whichever drive resumes.
  metrics.approvalsPending.inc({ where: "held" });
  let held: Awaited<ReturnType<typeof holdForApproval>>;
  try {
    held = await holdForApproval(d);
  } finally {
    metrics.approvalsPending.dec({ where: "held" });
  }
  if (held === "resolved") return { to: "resume" };
  if (held === "ended") return { to: "ended" };
  if (d.cancel.signal.aborted) return { to: "cancel" };
  return { to: "pause" };
}

/** Follows the log until the approval is resolved, the run ends, or the hold is up. */
async function holdForApproval(d: Drive): Promise<"resolved" | "waiting" | "ended"> {
  const state = (): "resolved" | "waiting" | "ended" => {
    const r = projectRun(d.runId, d.events);
    if (isTerminal(r.state)) return "ended";
    return r.state === RunState.PAUSED && r.pendingApprovalId !== "" ? "waiting" : "resolved";
  };
  await d.refresh();
  const holdMs = d.deps.approvalHoldMs ?? 0;
  if (state() !== "waiting" || holdMs <= 0) return state();
  // Made before anything is awaited: a stop or cancel that comes at any point ends it.
  const until = AbortSignal.any([d.stop, d.cancel.signal, AbortSignal.timeout(holdMs)]);
  for await (const ev of d.deps.log.follow(d.runId, d.events.length, until)) {
    d.events.push(ev.event);
    d.writer.saw(d.events.length, d.events.at(-1)?.hash ?? "");
    const s = state();
    if (s !== "waiting") return s;
  }
  return "waiting";
}

/**
 * The approval was resolved: the run goes on here, unless something else landed on the
 * head just read (then look again: it may be a cancel).
 */
export async function resume(d: Drive): Promise<Next> {
  try {
    await d.writer.appendAtHead({
      case: "runResumed",
      value: create(RunResumedSchema, {
        workerId: d.deps.workerId,
        epoch: BigInt(d.epoch),
        approvalId: lastResolvedApproval(d.events),
        spanId: d.spanId ?? "",
      }),
    });
  } catch (err) {
    if (isAgentdError(err, "ECONFLICT")) return { to: "hold" };
    throw err;
  }
  await d.refresh();
  return { to: "step" };
}

/**
 * The paused run holds no worker: its workspace is kept as an artifact to restore from
 * (streamed, normalised like an upload, secret values masked), the container removed. A
 * run a secret-carrying call ran in keeps its container instead (no snapshot).
 */
export async function pause(d: Drive): Promise<Next> {
  const box = d.box as SandboxHandle;
  // A lost container has no workspace to keep: the next drive recovers it (drive-lost.ts).
  if (await boxLost(d)) return { to: "release" };
  await box.killAll(); // nothing may change the workspace while it is copied
  // A snapshot leaving held files out would tell which files a secret-carrying call
  // touched (before-secret.ts): such a run keeps its container; the next drive finds it.
  if (hadSecretCall(d)) return { done: "paused" };
  const info = await snapshotWorkspace(d.deps.artifacts, box, d.writer.secrets, d.cancel.signal);
  await d.writer.append({
    case: "artifactEmitted",
    value: create(ArtifactEmittedSchema, {
      name: SNAPSHOT,
      digest: info.digest,
      sizeBytes: BigInt(info.size),
      mediaType: "application/x-tar",
    }),
  });
  await box.destroy();
  return { done: "paused" };
}
