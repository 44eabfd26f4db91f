/**
 * The start of a drive: the run's container (the previous owner's, with every process it
 * left killed and confirmed gone; else a new one from the last snapshot or the upload),
 * its skills and memory file, and `run.started` / `run.resumed`. Must never: let anything
 * the previous drive started run on into this one, or resume a run that still waits for a
 * person (it is held instead).
 */

import { create } from "@bufbuild/protobuf";
import type { ArtifactStore } from "../artifacts/port.ts";
import { loadSkills, selectSkills } from "../engine/skills.ts";
import { AgentdError, isAgentdError } from "../errors.ts";
import { type Event, RunResumedSchema, RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { keepHeldAfterRestore } from "../kernel/held-after-restore.ts";
import { READ_ONLY_TOOLS } from "../kernel/kernel.ts";
import { treesAsLeft } from "../kernel/runner-trees.ts";
import type { BaseIndex } from "../kernel/script-probe.ts";
import { taintFromEvents } from "../kernel/secret-taint.ts";
import { REPO_LABEL } from "../kernel/trust-store.ts";
import type { SandboxHandle, WorkspaceSource } from "../sandbox/port.ts";
import { TOOLS } from "../tools/registry.ts";
import { toolJsonSchema } from "../tools/tool.ts";
import { indexBaseArchive } from "./base-index.ts";
import { captureBeforeSecret } from "./before-secret.ts";
import type { Drive } from "./drive.ts";
import { openEgress } from "./drive-egress.ts";
import { runImage } from "./drive-image.ts";
import { chooseDriveImage } from "./drive-image-choice.ts";
import { reviewBudget } from "./drive-usage.ts";
import { isRecovering } from "./recovery-marker.ts";
import { baseArchive, lastArtifact, SNAPSHOT } from "./run-artifacts.ts";
import { type DriveContext, type Next, sandboxShape } from "./run-driver.ts";
import type { RunImage } from "./run-image.ts";
import { type WorkspaceConfig, workspaceConfigFromArchive } from "./workspace-config.ts";
import { recoverWorkspace } from "./workspace-recovery.ts";

/** Why a drive that found no running container for a started run made a new one. */
export const LOST_REASON =
  "the run's container was gone or no longer running when this drive began (killed, stopped, its agent died, or its engine restarted); a new one was made";

/** Sandbox up, context ready, the start recorded: the first transition of every drive. */
export async function start(d: Drive): Promise<{ next: Next; ctx: DriveContext } | { next: Next }> {
  if (d.cancel.signal.aborted) return { next: { to: "cancel" } };
  // A drive that found the log rewound recorded log.rewound but died (or lost Redis) before
  // run.failed: the loss is known, so the run fails now and nothing of it runs.
  const loss = d.events.find((e) => e.payload.case === "logRewound");
  if (loss?.payload.case === "logRewound")
    return {
      next: {
        to: "fail",
        code: "EREWOUND",
        message: `the stored log lost events after seq ${loss.payload.value.storedSeq} (recorded at seq ${loss.seq}); what they recorded is unknown, so the run cannot go on`,
      },
    };
  if (d.missingSecrets.length > 0)
    return {
      next: {
        to: "fail",
        code: "ESECRET_NOT_FOUND",
        message: `the run used ${d.missingSecrets.join(", ")}, which no secret provider of worker ${d.deps.workerId} has: their values could not be kept out of the run's output`,
      },
    };
  const base = await baseArchive(d.deps.artifacts, d.events);
  // The container (a takeover finds the previous owner's) and the workspace's agent
  // configuration (from the uploaded archive, see workspace-config.ts) at once; a new
  // container of the run's own image (its .agent/config.yaml may name it) waits for it.
  const configRead = workspaceConfigFromArchive(base);
  const [made, config] = await Promise.allSettled([sandboxFor(d, base, configRead), configRead]);
  if (made.status === "rejected") {
    if (made.reason instanceof ImageFailure) return { next: { to: "fail", ...made.reason.fail } };
    // Cancelled while the image was pulled (or the container made): the run ends cancelled.
    if (d.cancel.signal.aborted) return { next: { to: "cancel" } };
    throw made.reason;
  }
  d.box = made.value; // even if the config read failed: the next drive finds it
  if (config.status === "rejected") throw config.reason;
  try {
    await openEgress(d); // before any call: the proxy listens before a process can ask
  } catch (err) {
    if (!isAgentdError(err, "ESECRET_NOT_FOUND")) throw err;
    return { next: { to: "fail", code: err.code, message: err.message } };
  }
  // A new container for a run that had one: what the log says was written since the
  // restore point is applied again or recorded lost (workspace-recovery.ts), before
  // anything else runs in it — a held approval's call included.
  if (d.freshBox && d.events.some((e) => e.payload.case === "runStarted")) {
    const ended = await recoverWorkspace(d, d.box, LOST_REASON);
    if (ended !== undefined) return { next: ended };
  }
  const skills = await loadSkills({
    workspaceFiles: config.value.skillFiles,
    serverDir: d.deps.skillsDir,
  });
  let selected: ReturnType<typeof selectSkills>;
  try {
    selected = selectSkills(skills.skills, { named: d.run0.skills, prompt: d.run0.prompt });
  } catch (err) {
    // A skill named at CreateRun that exists nowhere: the run cannot be what was asked.
    return { next: { to: "fail", code: "ESKILL_NOT_FOUND", message: (err as Error).message } };
  }
  const ctx: DriveContext = {
    setupInputs: config.value.setupInputs,
    skills: selected.skills,
    ...(config.value.memory === undefined ? {} : { memory: config.value.memory }),
    tools: TOOLS.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: toolJsonSchema(t),
    })),
  };
  let index: Promise<BaseIndex> | undefined;
  d.kernelRun = {
    runId: d.runId,
    sessionId: d.sessionId,
    // The run's repository (approvedCommands are scoped to it), as trust counters name it.
    repo: repoOf(d.events),
    fence: d.epoch,
    sandbox: d.box,
    signal: d.callSignal,
    usage: d.usage,
    reviewBudget: reviewBudget(d),
    writer: d.writer,
    workerId: d.deps.workerId,
    commands: config.value.commands,
    // Files a secret-carrying call wrote, as the log records them (a takeover knows them).
    taint: taintFromEvents(d.events),
    // Whether only runners could have written the runner trees since one last ended.
    treesAsLeft: treesAsLeft(d.events),
    pristine: !d.events.some(
      (e) => e.payload.case === "toolCall" && !READ_ONLY_TOOLS.has(e.payload.value.tool),
    ),
    // Read once, when a command first runs a workspace file: streamed from the store, only
    // a digest per path kept (base-index.ts).
    baseIndex: () => {
      index ??= indexBaseArchive(base);
      return index;
    },
    ...(d.deps.callArtifacts === undefined ? {} : { artifacts: d.deps.callArtifacts }),
    beforeSecret: () => captureBeforeSecret(d),
    // The model reviewer sees it (as untrusted data) beside a call's preview.
    goal: d.run0.prompt,
  };
  // A fresh container lacks what the held calls wrote: absent is not "cleared".
  if (d.freshBox) await keepHeldAfterRestore(d.kernelRun.taint, (p) => d.writer.append(p));
  // Taken over while it waits for a person (its owner died holding it): it stays paused
  // until the approval is resolved (run.resumed is appended then).
  if (d.run0.state === RunState.PAUSED && d.run0.pendingApprovalId !== "")
    return { next: { to: "hold" }, ctx };
  await recordStart(d, d.box, d.chosenImage ?? (await chooseDriveImage(d, config.value)));
  return { next: { to: "settle" }, ctx };
}

/** `run.started` the first time, `run.resumed` after a pause, a takeover or a release. */
async function recordStart(d: Drive, box: SandboxHandle, chosen: RunImage): Promise<void> {
  const wasStarted = d.events.some((e) => e.payload.case === "runStarted");
  await d.writer.append(
    wasStarted
      ? {
          case: "runResumed",
          value: create(RunResumedSchema, {
            workerId: d.deps.workerId,
            epoch: BigInt(d.epoch),
            approvalId: lastResolvedApproval(d.events),
            spanId: d.spanId ?? "",
          }),
        }
      : {
          case: "runStarted",
          value: create(RunStartedSchema, {
            workerId: d.deps.workerId,
            epoch: BigInt(d.epoch),
            containerId: box.id,
            spanId: d.spanId ?? "",
            ...(d.ownImage ?? {
              image: chosen.image,
              imageReason: chosen.reason,
              ecosystem: chosen.ecosystem,
              // The build by the engine's id: a later container of the run uses the same one.
              imageDigest: chosen.pin ?? (await engineImageId(d, chosen.image)),
              imageSource: "local",
            }),
          }),
        },
  );
  await d.refresh();
}

/**
 * The run's container. One that exists was the previous owner's: whatever it started
 * (a call it never finished, a daemon it spawned) is killed and confirmed gone before this
 * drive records anything; one a drive left mid-recovery is removed. Else a new one from
 * the last snapshot, or the upload.
 */
async function sandboxFor(
  d: Drive,
  base: WorkspaceSource | undefined,
  config: Promise<WorkspaceConfig>,
): Promise<SandboxHandle> {
  const found = await d.deps.sandbox.find(d.runId);
  if (found !== undefined) {
    await found.killAll();
    // Left mid-recovery by a drive that died (recovery-marker.ts): recovered again, anew.
    if (!(await isRecovering(found))) return found;
    await found.destroy();
  }
  const cfg = await config;
  const own = await runImage(d, cfg.image);
  if (own !== undefined && "fail" in own) throw new ImageFailure(own.fail);
  // Not the run's own image: one of agentd's, by policy, the run's words or detection.
  if (own === undefined) d.chosenImage = await chooseDriveImage(d, cfg);
  d.freshBox = true;
  const snapshot = lastArtifact(d.events, SNAPSHOT);
  const workspace =
    snapshot !== undefined ? await artifactSource(d.deps.artifacts, snapshot) : undefined;
  if (own !== undefined) d.ownImage = own.started;
  return d.deps.sandbox.create({
    runId: d.runId,
    tenantId: d.run0.tenantId,
    ...sandboxShape(d.deps.policy()),
    ...(own === undefined
      ? { image: d.chosenImage?.pin ?? d.chosenImage?.image ?? sandboxShape(d.deps.policy()).image }
      : { image: own.image, userImage: true }),
    // The last snapshot, else the upload: both stream from the store into the container.
    ...(workspace !== undefined
      ? { workspace }
      : base !== undefined && base.size > 0
        ? { workspace: base }
        : {}),
  });
}

/** The engine's id of an image ("" when the sandbox cannot tell or the lookup fails). */
async function engineImageId(d: Drive, image: string): Promise<string> {
  return (await d.deps.sandbox.imageId?.(image).catch(() => undefined)) ?? "";
}

/** The run's own image was refused or could not be pulled: the run fails with this. */
class ImageFailure extends Error {
  readonly fail: { code: string; message: string };
  constructor(fail: { code: string; message: string }) {
    super(fail.message);
    this.fail = fail;
  }
}

/** A stored archive as a workspace source: streamed from the store, never read whole. */
async function artifactSource(store: ArtifactStore, digest: string): Promise<WorkspaceSource> {
  const info = await store.stat(digest);
  if (info === undefined) throw new AgentdError("EIO", `workspace snapshot ${digest} is missing`);
  return { size: info.size, open: () => store.read(digest) };
}

/** The approval the run resumes after (the last one resolved). */
export function lastResolvedApproval(events: readonly Event[]): string {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "approvalResolved") return p.value.approvalId;
  }
  return "";
}

/** The run's `repo` label from its run.queued ("default" without one). */
function repoOf(events: Drive["events"]): string {
  for (const e of events)
    if (e.payload.case === "runQueued") return e.payload.value.labels[REPO_LABEL] ?? "default";
  return "default";
}
