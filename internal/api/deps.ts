/** What the RPC handlers need; built by the composition root (cmd/agentd). */
import type { ArtifactStore } from "../artifacts/port.ts";
import type { Principal } from "../auth/tokens.ts";
import type { EventLog, RunHead } from "../eventlog/port.ts";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import type { IdempotencyStore } from "../idempotency/port.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { RunDeletionDeps } from "../lifecycle/delete-run.ts";
import type { PolicyChangesDeps } from "../policychanges/deps.ts";
import type { RunProjectionCache } from "../projections/run-cache.ts";
import type { RunAdmission } from "../scheduler/admission.ts";
import type { RunQueue } from "../scheduler/port.ts";
import type { TenantConcurrency } from "../scheduler/tenant-limits.ts";
import type { TenantArtifactLedger } from "../tenancy/artifact-bytes.ts";
import type { CreateRunCrashPoint } from "./crash-points.ts";
import type { ArchivedRuns } from "./interceptors/archived-read-only.ts";
import { notFoundRun, runIdField } from "./validate.ts";

export interface ApiDeps {
  log: EventLog;
  runs: RunProjectionCache;
  artifacts: ArtifactStore;
  /** The largest budget a CreateRun may ask for (DEFAULT_BUDGET_MAX when not given). */
  budgetMax?: BudgetMax;
  /** CreateRun's idempotency keys; without one, keys live in this process only. */
  idempotency?: IdempotencyStore;
  /** The run queue workers claim from; without one, runs stay queued (no workers). */
  queue?: RunQueue;
  /**
   * Writes a new run's first event and its queue record as one step (scheduler/admission.ts).
   * Without one (in-process routers of tests), CreateRun appends, then enqueues.
   */
  admission?: RunAdmission;
  /** Test builds only: called at each named point of CreateRun (crash-points.ts). */
  crashPoint?: (point: CreateRunCrashPoint) => void;
  /**
   * How long CancelRun of a running run waits, ms, for its owner to end it after
   * `run.cancel_requested` (never longer than the client's deadline allows). The answer is
   * then the run as it is: CANCELLED, or still RUNNING with `cancel_requested` set.
   * Default DEFAULT_CANCEL_WAIT_MS; 0 answers at once.
   */
  cancelWaitMs?: number;
  /**
   * The policy in force for a tenant (its own file, else the server's): CreateRun checks a
   * requested image against its sandbox.images (INVALID_ARGUMENT naming `image`). Without
   * one, an image is checked by the worker only.
   */
  policy?: (tenantId: string) => Policy;
  /** Run deletion (DeleteRun, PurgeTenant): absent, those answer UNIMPLEMENTED. */
  deletion?: RunDeletionDeps;
  /**
   * How long an UploadWorkspace receipt lets CreateRun name its digest, and keeps the blob
   * from any deletion, ms (default DEFAULT_UPLOAD_RECEIPT_TTL_MS, 24 h; each CreateRun using
   * it extends it to at least 10 minutes from then).
   */
  uploadReceiptTtlMs?: number;
  /** The tenants' stored artifact bytes: uploads are charged to their tenant (artifactBytes). */
  tenantArtifacts?: TenantArtifactLedger;
  /** Called before a run is deleted (the archive plugs in here); a throw keeps the run. */
  beforeDelete?: (tenantId: string, runId: string) => Promise<void>;
  /**
   * Runs served read-only from their archives (`--archive-dir`): `log` answers from them for
   * runs it no longer holds; this finds one for GetArtifact and the write refusals. Absent:
   * no archives are served.
   */
  archive?: ArchivedRuns;
  /**
   * A tenant's concurrency limit and its source, for the hold reason of its queued runs
   * (GetRun's held_by). Without one, a run held for a slot says "server.tenantLimit".
   */
  tenantConcurrency?: (tenantId: string) => TenantConcurrency;
  /**
   * CreateRun's per-tenant gate (tenant-gate.ts: a spent day, a full minute): the error to
   * answer, or undefined. Without one, no such limit.
   */
  tenantGate?: (tenantId: string) => Promise<Error | undefined>;
  /**
   * The tenant's own limit on one workspace upload's unpacked bytes (`uploadBytes` in the
   * auth file), tightening the server's --max-workspace-bytes. Without one, the server's.
   */
  tenantUploadBytes?: (tenantId: string) => number | undefined;
  /**
   * Rules proposed from approvals (ResolveApproval propose_rule) and their application
   * (ListPolicyChanges, ApplyPolicyChange, RejectPolicyChange). Without one, a proposal and
   * those RPCs answer UNIMPLEMENTED.
   */
  policyChanges?: PolicyChangesDeps;
}

export interface BudgetMax {
  maxTokens: number;
  maxCostMicros: number;
  maxWallMs: number;
}

/** The server's default maxima (its flags' defaults). */
export const DEFAULT_BUDGET_MAX: BudgetMax = {
  maxTokens: 2_000_000,
  maxCostMicros: 100_000_000,
  maxWallMs: 86_400_000,
};

/**
 * CancelRun's default wait: a worker notices a cancel within about 2 s (its tool's process
 * group killed, the container removed); 30 s covers a slow container removal on a loaded
 * host without holding a client much longer than a usual RPC deadline.
 */
export const DEFAULT_CANCEL_WAIT_MS = 30_000;

/** The caller's run (head and projection), or NOT_FOUND for a missing or foreign run. */
export async function runOf(
  deps: ApiDeps,
  principal: Principal,
  runId: string,
  field = "run_id",
): Promise<{ head: RunHead; run: Run }> {
  runIdField(field, runId);
  const head = await deps.log.head(runId);
  if (head === undefined || head.tenantId !== principal.tenantId) throw notFoundRun(runId);
  const run = await deps.runs.get(runId, head);
  if (run === undefined) throw notFoundRun(runId);
  return { head, run };
}
