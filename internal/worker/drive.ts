/**
 * One drive of one run: what every state of the run driver (run-driver.ts) works with —
 * the run's events as this drive has read them, its fenced and redacted writer, its
 * secrets, its container, the kernel's view of the run, counters and signals.
 *
 * Signals, from soft to hard: `stop` (the worker is stopping or lost its lease: release at
 * the next step boundary), `halt` (stop now: the running call is killed and recorded
 * `interrupted`), `cancel` (a run.cancel_requested is in the log: the running call is
 * killed and recorded `cancelled`, the run ends cancelled). Must never: keep a secret value
 * anywhere but in memory, or outlive the drive (close() stops the cancel watch).
 */

import type { RunEgress } from "../egress/run-egress.ts";
import type { EngineUsage } from "../engine/port.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import type { KernelRun } from "../kernel/kernel.ts";
import { loadRunSecrets } from "../kernel/run-secrets.ts";
import { createRunWriter, type RunWriter } from "../kernel/run-writer.ts";
import { WALL_BUDGET_REASON as WALL_BUDGET } from "../kernel/stop-reason.ts";
import { heldArtifactStore } from "../lifecycle/held-artifact-store.ts";
import { projectRun } from "../projections/run-projection.ts";
import { OWNER_CHANGED, type SandboxHandle } from "../sandbox/port.ts";
import { quotaArtifactStore } from "../tenancy/quota-artifact-store.ts";
import type { StartedImage } from "./drive-image.ts";
import { stepsSoFar } from "./run-counts.ts";
import type { DriverDeps } from "./run-driver.ts";
import type { RunImage } from "./run-image.ts";

/** Why a call's process was killed: the kernel records `cancelled` or `interrupted`. */
export const HALT_REASON = "interrupted";
export const CANCEL_REASON = "cancelled";
/**
 * The lease is gone (or may be): the call is killed and recorded `interrupted`, but the
 * container may already be another worker's — nothing else in it may be touched.
 */
export const LEASE_LOST_REASON = OWNER_CHANGED;
/** The run's wall-clock budget ran out under the call: the kernel records ELIMIT_TIME. */
export { WALL_BUDGET_REASON } from "../kernel/stop-reason.ts";

export interface Drive {
  readonly deps: DriverDeps;
  readonly runId: string;
  readonly sessionId: string;
  readonly epoch: number;
  /** The run as projected when the drive began. */
  readonly run0: Run;
  /** Release at the next step boundary (worker stopping, lease lost). */
  readonly stop: AbortSignal;
  /** Aborted when a cancel request lands; also aborts the running call. */
  readonly cancel: AbortController;
  /** Aborts the running call (reason HALT_REASON or CANCEL_REASON). */
  readonly callSignal: AbortSignal;
  readonly writer: RunWriter;
  /** The run's events as this drive has read them (refresh() reads what came since). */
  events: Event[];
  box: SandboxHandle | undefined;
  /** The run's own image this drive made its container from (drive-image.ts), for run.started. */
  ownImage?: StartedImage;
  /** One of agentd's images this drive chose for its new container (drive-image-choice.ts). */
  chosenImage?: RunImage;
  /** The drive made the container (not a previous owner's): it holds nothing of /cache. */
  freshBox: boolean;
  /** This drive's `invoke_agent agentd` span id, recorded in its run.started/run.resumed. */
  spanId?: string;
  /** The run's egress proxy, when its sandbox has an egress network (drive-egress.ts). */
  egress: RunEgress | undefined;
  kernelRun: KernelRun | undefined;
  /** A call that carried a secret ran in this drive (before-secret.ts): no diff after it. */
  secretCalled?: boolean;
  readonly usage: EngineUsage;
  /** Model steps of the run, this drive's and the ones before it (from the log: run-counts.ts). */
  steps: number;
  /**
   * What the provider reported for this drive's last step over the step's estimated prompt
   * (engine/request-tokens.ts), at least 1: the next estimate is scaled by it. In memory
   * only: a new drive starts at 1 (the last reported prompt still bounds its estimate).
   */
  promptScale: number;
  /** Failed calls in a row, per call (tool + input), for ELOOP. */
  readonly failures: Map<string, number>;
  /** Secrets the run used that no provider of this worker has (the drive must not go on). */
  readonly missingSecrets: readonly string[];
  /**
   * Kills the running call (reason WALL_BUDGET_REASON) when `ms` pass: the run's wall
   * time left. Returns the disarm, called when the call ends.
   */
  armWallBudget(ms: number): () => void;
  /** Reads the events appended since this drive last looked. */
  refresh(): Promise<Event[]>;
  close(): void;
}

/** Opens a drive: reads the run, rebuilds its secrets, starts the cancel watch. */
export async function openDrive(
  given: DriverDeps,
  runId: string,
  epoch: number,
  signals: { stop: AbortSignal; halt?: AbortSignal },
): Promise<Drive> {
  const logged = await given.log.read(runId, 0);
  const events = logged.map((e) => e.event);
  const run0 = projectRun(runId, events);
  const deps = withRunArtifacts(
    withTenantPolicy(given, runId, run0.tenantId),
    runId,
    run0.tenantId,
  );
  const secrets = await loadRunSecrets({
    events,
    providers: deps.secretProviders ?? [],
    onError: (name, err) => deps.logger?.warn({ runId, secret: name, err }, "secret lookup failed"),
  });
  const writer = createRunWriter({
    log: deps.log,
    runId,
    sessionId: run0.sessionId,
    fence: epoch,
    secrets,
    head: logged.length,
    headHash: logged.at(-1)?.event.hash ?? "",
  });
  const cancel = new AbortController();
  const callAbort = new AbortController();
  const onCancel = (): void => callAbort.abort(CANCEL_REASON);
  const onHalt = (): void => {
    const why = signals.halt?.reason;
    callAbort.abort(why === "lost" || why === "expired" ? LEASE_LOST_REASON : HALT_REASON);
  };
  cancel.signal.addEventListener("abort", onCancel, { once: true });
  signals.halt?.addEventListener("abort", onHalt, { once: true });
  if (signals.halt?.aborted) onHalt();
  const watch = watchCancel(deps, runId, logged.length, cancel);
  const d: Drive = {
    deps,
    runId,
    sessionId: run0.sessionId,
    epoch,
    run0,
    stop: signals.stop,
    cancel,
    callSignal: callAbort.signal,
    writer,
    events,
    box: undefined,
    freshBox: false,
    egress: undefined,
    kernelRun: undefined,
    usage: {
      inputTokens: Number(run0.usage?.inputTokens ?? 0n),
      outputTokens: Number(run0.usage?.outputTokens ?? 0n),
    },
    steps: stepsSoFar(events),
    promptScale: 1,
    failures: new Map(),
    missingSecrets: secrets.missing,
    armWallBudget(ms) {
      const t = setTimeout(() => callAbort.abort(WALL_BUDGET), Math.max(0, ms));
      return () => clearTimeout(t);
    },
    async refresh() {
      const news = await deps.log.read(runId, d.events.length);
      for (const ev of news) d.events.push(ev.event);
      writer.saw(d.events.length, d.events.at(-1)?.hash ?? "");
      // The cancel watch is the fast path; whatever the drive reads is checked too.
      if (news.some((e) => e.type === "run.cancel_requested")) cancel.abort();
      return news.map((e) => e.event);
    },
    close() {
      watch.abort();
      signals.halt?.removeEventListener("abort", onHalt);
    },
  };
  if (events.some((e) => e.payload.case === "runCancelRequested")) cancel.abort();
  return d;
}

/**
 * Follows the log for a cancel request and aborts `cancel` when one appears. A follow that
 * fails (the log unreachable) is started again after a pause, from where it was: the watch
 * never dies silently while the drive goes on.
 */
function watchCancel(
  deps: DriverDeps,
  runId: string,
  after: number,
  cancel: AbortController,
): AbortController {
  const stop = new AbortController();
  void (async () => {
    let from = after;
    while (!stop.signal.aborted && !cancel.signal.aborted) {
      try {
        for await (const ev of deps.log.follow(runId, from, stop.signal)) {
          from = ev.seq;
          if (ev.type === "run.cancel_requested") {
            cancel.abort();
            return;
          }
        }
      } catch {
        await new Promise((r) => setTimeout(r, 500).unref());
      }
    }
  })();
  return stop;
}

/**
 * The run's artifact writes: each held until the run's events name its blob, charged to
 * the run's tenant and checked against its artifactBytes; the kernel's tool outputs are
 * held and charged too, never refused (the drive's next write refuses).
 */
function withRunArtifacts(deps: DriverDeps, runId: string, tenantId: string): DriverDeps {
  const held =
    deps.blobHolds === undefined
      ? deps.artifacts
      : heldArtifactStore(deps.artifacts, deps.blobHolds, runId);
  const ledger = deps.tenantArtifacts;
  if (ledger === undefined) return { ...deps, artifacts: held, callArtifacts: held };
  const limitOf = async () => (await deps.tenantDay?.limitsOf(tenantId))?.artifactBytes;
  return {
    ...deps,
    artifacts: quotaArtifactStore(held, { tenantId, ledger, limitOf }),
    callArtifacts: quotaArtifactStore(held, { tenantId, ledger, limitOf: async () => undefined }),
  };
}

/** The drive's deps with the run's tenant's policy and kernel, when it has its own. */
function withTenantPolicy(deps: DriverDeps, runId: string, tenantId: string): DriverDeps {
  const own = deps.forTenant?.(tenantId);
  if (own === undefined) return deps;
  deps.logger?.info(
    { runId, tenant: tenantId, policySource: own.describe.source, policy: own.describe.path },
    "drive uses the tenant's policy",
  );
  return {
    ...deps,
    policy: own.policy,
    kernel: own.kernel,
    ...(own.secretProviders === undefined ? {} : { secretProviders: own.secretProviders }),
  };
}
