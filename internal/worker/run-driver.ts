/**
 * Drives one run while this worker holds it, as a state machine: each lifecycle state is a
 * small function (drive-*.ts) that does its work — every change of state a fenced append
 * to the log, through the drive's RunWriter — and names the next state:
 *
 *   start ─▶ settle/step ─▶ step … ─▶ complete | fail
 *      │          │    └──▶ hold ─▶ resume ─▶ step …      (approval in time)
 *      └─▶ hold   │              └─▶ pause                 (the hold ran out: snapshot)
 *                 └─▶ cancel (a cancel request), release (the worker stops)
 *
 * The terminal rule lives in one place (drive()'s catch): the log refuses any append after
 * the run's end (EENDED), and a refusal ends the drive with the container destroyed;
 * EFENCED (another worker owns the run now) and storage errors go up to the worker.
 * EREWOUND (the stored log lost events this drive saw) fails the run there too, with a
 * `log.rewound` record on the stored head (drive-rewound.ts).
 * Engine state is never persisted: each step's context is rebuilt from the log.
 */

import type { ArtifactStore } from "../artifacts/port.ts";
import type { DepCacheStore } from "../depcache/port.ts";
import type { AssembleInput } from "../engine/context.ts";
import type { AgentEngine, EngineToolSpec } from "../engine/port.ts";
import type { PriceTable } from "../engine/pricing.ts";
import type { Skill } from "../engine/skills.ts";
import { isAgentdError } from "../errors.ts";
import { isLogRewound } from "../eventlog/log-rewound-error.ts";
import type { EventLog } from "../eventlog/port.ts";
import type { Kernel } from "../kernel/kernel.ts";
import { type Policy, policyImage } from "../kernel/policy-schema.ts";
import type { SecretProvider } from "../kernel/secrets.ts";
import type { TrustCounters } from "../kernel/trust.ts";
import type { UploadReceiptRefs } from "../lifecycle/port.ts";
import { isTerminal } from "../projections/run-projection.ts";
import { CACHE_ENV } from "../sandbox/cache-env.ts";
import type { Sandbox, SandboxShape } from "../sandbox/port.ts";
import type { Logger } from "../telemetry/logger.ts";
import { emitLostDriveSpan } from "../telemetry/lost-drive-span.ts";
import { observeQueueWait } from "../telemetry/run-clock.ts";
import { startRunSpan } from "../telemetry/run-span.ts";
import type { TenantArtifactLedger } from "../tenancy/artifact-bytes.ts";
import type { TenantDayLedger } from "../tenancy/day-usage.ts";
import { type Drive, openDrive } from "./drive.ts";
import { CA_ENV, type DriveEgressOptions, networkOf } from "./drive-egress.ts";
import { cancel, complete, endedElsewhere, fail, outcomeOf } from "./drive-end.ts";
import { hold, pause, resume } from "./drive-hold.ts";
import { rewound } from "./drive-rewound.ts";
import { setupCalls, setupStep } from "./drive-setup.ts";
import { start } from "./drive-start.ts";
import { step } from "./drive-step.ts";
import { lostDriveOf } from "./lost-drive.ts";
import { redactError } from "./redacted-error.ts";

export interface RunLimits {
  /** Model steps at most. */
  maxSteps: number;
  /** Input + output tokens at most. */
  maxTokens: number;
  /** Wall-clock time of the run at most (all drives, paused time not counted), ms. */
  maxWallMs: number;
  /**
   * The largest maximum output a model request is sent with (default 16,384, the smallest
   * priced model's own limit): when more is left of the budget, no maximum is sent.
   */
  maxOutputTokensSent?: number;
  /**
   * The least output a step is asked with (default 32): a step whose estimated prompt
   * leaves less of the token or cost budget is not asked (ELIMIT_TOKENS / ELIMIT_COST).
   */
  minOutputTokens?: number;
  /** Budget of one step's context, estimated tokens. */
  contextBudgetTokens: number;
  /** The same failing call this many times in a row ends the run. */
  maxRepeatedFailures: number;
}

export const DEFAULT_RUN_LIMITS: RunLimits = {
  maxSteps: 50,
  maxTokens: 2_000_000,
  maxWallMs: 60 * 60_000,
  contextBudgetTokens: 100_000,
  maxRepeatedFailures: 3,
};

export interface DriverDeps {
  log: EventLog;
  kernel: Kernel;
  engine: AgentEngine;
  sandbox: Sandbox;
  artifacts: ArtifactStore;
  policy: () => Policy;
  /**
   * The run's tenant's policy and the kernel that decides by it (a tenant with a policy
   * file of its own); without it, or when it answers undefined, `policy` and `kernel`.
   * Asked once per drive, from the run's tenant: any worker that drives the run (a resume,
   * a takeover) answers the same way.
   */
  forTenant?: (tenantId: string) => TenantDriverDeps | undefined;
  /** Where the run's secret values come from (for redaction across the whole run). */
  secretProviders?: SecretProvider[];
  /** Directory of the server's skills. */
  skillsDir: string;
  systemPrompt: string;
  /** Model id, for pricing. */
  model: string;
  prices: PriceTable;
  limits: RunLimits;
  workerId: string;
  /**
   * How long a run that waits for an approval keeps its worker and its container before it
   * pauses for real (workspace snapshot, container removed, worker freed). An approval
   * resolved within the hold resumes in the same container at once. Default 0: pause at
   * once (`agentd worker` and `agentd dev` hold 60 s, --approval-hold-ms).
   */
  approvalHoldMs?: number;
  /** The repository's trust counters (network.trust); the kernel's trust store. */
  trustCounters?: (runId: string) => Promise<TrustCounters>;
  /**
   * Dependency caches of setup steps (issue #24, depcache/); without it setups run uncached.
   */
  depCache?: DepCacheStore;
  /** Egress proxy settings (name resolution, upstream trust, timeouts); default the system's. */
  egress?: DriveEgressOptions;
  logger?: Logger;
  now?: () => number;
  /**
   * The tenants' daily use and limits (tokensPerDay, costPerDayUsd) shared by every worker:
   * a run of a tenant whose day is spent fails before its next model request. Without one,
   * no daily limit.
   */
  tenantDay?: TenantDayLedger;
  /**
   * The tenants' stored artifact bytes (artifactBytes, its limit published with the day's
   * limits in `tenantDay`): each blob a run stores is charged to its tenant, and a write
   * that finds the tenant at or over its limit fails the run (ELIMIT_ARTIFACTS). Without
   * one, nothing is counted.
   */
  tenantArtifacts?: TenantArtifactLedger;
  /**
   * The blob references of the deletion store: each of a run's writes holds its blob until
   * the run's events name it, so another run's deletion cannot remove it in between
   * (lifecycle/held-artifact-store.ts). Without it, writes take no reference.
   */
  blobHolds?: UploadReceiptRefs;
  /** Set per drive: the store the kernel keeps the run's full tool outputs in (drive.ts). */
  callArtifacts?: ArtifactStore;
}

/** What differs per tenant in a drive: its policy and the kernel deciding by it. */
export interface TenantDriverDeps {
  policy: () => Policy;
  kernel: Kernel;
  /** Where the run's secret values come from (the tenant policy's providers). */
  secretProviders?: SecretProvider[];
  /** Which policy decides ("tenant": the tenant's own file), for the drive's log line. */
  describe: { source: "tenant" | "server"; path: string };
}

/** "released": the worker is stopping; the run is left at a step boundary for another worker. */
export type DriveOutcome = "completed" | "failed" | "cancelled" | "paused" | "released";

/** What a drive's steps share once it started (the model's view of the workspace). */
export interface DriveContext {
  /** sha256 of each uploaded setup input (the dependency cache's key, drive-setup.ts). */
  setupInputs: ReadonlyMap<string, string>;
  skills: Skill[];
  memory?: AssembleInput["memory"];
  tools: EngineToolSpec[];
}

/** The next state, or the drive's outcome. */
export type Next =
  | { to: "settle" | "step" | "hold" | "resume" | "pause" | "cancel" | "release" | "ended" }
  | { to: "complete"; summary: string }
  | { to: "fail"; code: string; message: string }
  | { done: DriveOutcome };

export interface DriveSignals {
  /** Release at the next step boundary (the worker stops, or lost its lease). */
  stop: AbortSignal;
  /** Kill the running call now and release (the grace period ended, the lease is gone). */
  halt?: AbortSignal;
  /**
   * The run was taken over: the previous drive's lease lapsed (claim reason "takeover"), so
   * it never closed its spans. This drive emits a stand-in for it (lost-drive-span.ts).
   */
  takeover?: boolean;
}

/**
 * Drives `runId` as the owner of lease `epoch` until it ends, pauses or is released.
 * `signals` may be a bare AbortSignal (stop only), as before.
 */
export async function driveRun(
  deps: DriverDeps,
  runId: string,
  epoch: number,
  signals: AbortSignal | DriveSignals,
): Promise<DriveOutcome> {
  const s = signals instanceof AbortSignal ? { stop: signals } : signals;
  const claimedAt = Date.now();
  const d = await openDrive(deps, runId, epoch, s);
  // A run ended while queued (cancelled) never waited for this drive.
  if (!isTerminal(d.run0.state)) observeQueueWait(d.events, claimedAt);
  const trace = traceParentOf(d);
  const lost = s.takeover === true ? lostDriveOf(d.events, epoch, claimedAt) : undefined;
  const standIn =
    lost === undefined
      ? undefined
      : emitLostDriveSpan({ runId, sessionId: d.sessionId, ...trace, ...lost }, claimedAt);
  const span = startRunSpan({
    runId,
    sessionId: d.sessionId,
    ...trace,
    model: deps.model,
    workerId: deps.workerId,
    epoch,
    ...(standIn === undefined
      ? {}
      : {
          links: [{ context: standIn, attributes: { "agentd.link": "lost_drive" } }],
          interrupted: lost?.interrupted ?? [],
        }),
  });
  d.spanId = span.spanId;
  try {
    if (isTerminal(d.run0.state)) {
      span.end("ended");
      return outcomeOf(d.run0.state);
    }
    const outcome = await span.run(async () => {
      const o = await drive(d);
      // In the drive's span: the line carries the run's trace id (trace_id, span_id).
      deps.logger?.info({ runId, epoch, outcome: o }, "drive ended");
      return o;
    });
    span.end(outcome);
    return outcome;
  } catch (err) {
    span.fail(err);
    // The worker logs what escapes a drive: not one of the run's secret values in it.
    throw redactError(err, d.writer.secrets);
  } finally {
    d.close();
    await d.egress?.close(); // before the next drive of the run (here or elsewhere) listens
    d.box?.detach?.(); // released, paused, failed: whatever this drive still held open
  }
}

/** The trace context CreateRun stored with the run (run.queued). */
function traceParentOf(d: Drive): { traceParent: string; traceState: string } {
  const first = d.events[0]?.payload;
  return first?.case === "runQueued"
    ? { traceParent: first.value.traceParent, traceState: first.value.traceState }
    : { traceParent: "", traceState: "" };
}

/** The state machine, and the one place where the run's end and a cancel are handled. */
async function drive(d: Drive): Promise<DriveOutcome> {
  try {
    const started = await start(d);
    if (!("ctx" in started)) return await finish(d, started.next);
    const { ctx } = started;
    let next: Next = started.next;
    // Once per run, before the model's first step (and again only for a new container: a
    // run taken over while its approval waits runs it once the approval is resolved,
    // before the approved call).
    let setupDone = false;
    const setup = async (n: Next): Promise<Next> => {
      if (setupDone || !("to" in n) || (n.to !== "settle" && n.to !== "step")) return n;
      setupDone = true;
      return (await setupStep(d, ctx.setupInputs)) ?? n;
    };
    if ("to" in next && next.to === "settle") next = await setup(next);
    while (!("done" in next)) {
      if (d.cancel.signal.aborted && next.to !== "cancel") next = { to: "cancel" };
      switch (next.to) {
        case "settle":
        case "step":
          next = await step(d, ctx);
          break;
        case "hold":
          next = await hold(d);
          break;
        case "resume":
          next = await resume(d);
          // Only a setup the run already had runs again (never a first one mid-run).
          if (d.freshBox && setupCalls(d.events) > 0) next = await setup(next);
          break;
        default:
          return await finish(d, next);
      }
    }
    return next.done;
  } catch (err) {
    // First: nothing else may be sealed on a store that lost what this drive saw.
    if (isLogRewound(err)) return await rewound(d, err);
    if (isAgentdError(err, "EENDED")) return await endedElsewhere(d);
    // The tenant's artifactBytes: the write that found it spent fails the run, naming it.
    if (isAgentdError(err, "ELIMIT_ARTIFACTS"))
      return await finishSafely(d, { to: "fail", code: err.code, message: err.message });
    if (
      isAgentdError(err, "ECANCELLED") ||
      (d.cancel.signal.aborted && !isAgentdError(err, "EFENCED"))
    )
      return await finishSafely(d, { to: "cancel" });
    throw err;
  }
}

/** The last transitions: each ends the drive. */
async function finish(d: Drive, next: Next): Promise<DriveOutcome> {
  if ("done" in next) return next.done;
  let r: Next;
  switch (next.to) {
    case "complete":
      r = await complete(d, next.summary);
      break;
    case "fail":
      r = await fail(d, next.code, next.message);
      break;
    case "cancel":
      r = await cancel(d);
      break;
    case "pause":
      r = await pause(d);
      break;
    case "ended":
      return endedElsewhere(d);
    case "release":
      return "released";
    default:
      throw new Error(`the drive cannot end in state ${next.to}`);
  }
  return "done" in r ? r.done : "released";
}

/** A final transition whose own append may meet the run's end (someone else ended it). */
async function finishSafely(d: Drive, next: Next): Promise<DriveOutcome> {
  try {
    return await finish(d, next);
  } catch (err) {
    if (isLogRewound(err)) return await rewound(d, err);
    if (isAgentdError(err, "EENDED")) return endedElsewhere(d);
    throw err;
  }
}

/** The cache variables (with a /cache) and the run CA's (with credential hosts). */
function shapeEnv(p: Policy): { env?: Record<string, string> } {
  const env = {
    ...(p.sandbox.cacheSize > 0 ? CACHE_ENV : {}),
    ...(p.sandbox.network === "allowlist" && networkOf(p).credentials.length > 0 ? CA_ENV : {}),
  };
  return Object.keys(env).length === 0 ? {} : { env };
}

/** The sandbox a run gets under `p` (what a worker keeps warm containers of). */
export function sandboxShape(p: Policy): SandboxShape {
  return {
    image: policyImage(p),
    limits: {
      memoryBytes: p.sandbox.memory,
      cpus: p.sandbox.cpu,
      pids: p.sandbox.pids,
      tmpBytes: p.sandbox.tmp,
      workspaceBytes: p.sandbox.workspaceSize,
      cacheBytes: p.sandbox.cacheSize,
    },
    // allowlist: the run's own network, out only through its egress proxy (drive-egress.ts).
    network: p.sandbox.network === "allowlist" ? "egress" : "none",
    ...shapeEnv(p),
  };
}
