/**
 * @agentd/client: the TypeScript client of agentd. Connect with an address and a token;
 * create a run from a directory (packed as agentctl packs it: git's file list or the
 * .gitignore rules, links out of the tree left out; streamed with UploadWorkspace when it
 * is large); follow its events, resumed from the last seq after a dropped connection;
 * approve or deny (optionally proposing a rule); list, apply and reject policy changes;
 * override a reviewer's verdict; fetch artifacts (checked against their sha256).
 *
 *   import { AgentdClient } from "@agentd/client";
 *   const agentd = new AgentdClient({ address: "http://127.0.0.1:7070", token });
 *   const run = await agentd.createRun({ prompt: "fix the failing test", dir: "." });
 *   for await (const ev of agentd.events(run.runId)) console.log(ev.type);
 *
 * Must never: send the token anywhere but `address`, or hand out an artifact whose bytes
 * do not match its digest.
 */
import { createHash } from "node:crypto";
import { followEvents } from "./follow.ts";
import {
  ApprovalDecision,
  type Event,
  ProposedRuleKind,
  type ReviewOverridden,
  type RunBudget,
} from "./gen/agentd/v1/events_pb.js";
import type {
  ApplyPolicyChangeResponse,
  Approval,
  CreateRunRequest,
  DeleteRunResponse,
  PolicyChange,
  PurgeTenantResponse,
  Run,
} from "./gen/agentd/v1/run_service_pb.js";
import { packWorkspace } from "./pack.ts";
import { type ConnectOptions, createRunClient, type RunClient } from "./transport.ts";
import { sendWorkspace } from "./upload.ts";

export { followEvents } from "./follow.ts";
export { ApprovalDecision } from "./gen/agentd/v1/events_pb.js";
export { RunState } from "./gen/agentd/v1/run_service_pb.js";
export { PackError, packWorkspace } from "./pack.ts";
export { type TlsProblem, tlsProblem } from "./tls-problem.ts";
export { type ConnectOptions, createRunClient, isTransient, type RunClient } from "./transport.ts";
export { INLINE_WORKSPACE_MAX, sendWorkspace } from "./upload.ts";
export type {
  ApplyPolicyChangeResponse,
  Approval,
  DeleteRunResponse,
  Event,
  PolicyChange,
  PurgeTenantResponse,
  ReviewOverridden,
  Run,
  RunBudget,
};

export interface CreateRunOptions
  extends Partial<
    Omit<CreateRunRequest, "$typeName" | "prompt" | "workspaceTar" | "workspaceDigest" | "budget">
  > {
  prompt: string;
  budget?: { maxTokens?: bigint; maxCostMicros?: bigint; maxWallMs?: bigint };
  /** A directory to pack and upload as the workspace. */
  dir?: string;
  /** Largest compressed archive of `dir`, bytes (default 256 MiB). */
  maxWorkspaceBytes?: number;
}

export class AgentdClient {
  /** The generated client, for anything this class does not wrap. */
  readonly rpc: RunClient;

  constructor(opts: ConnectOptions) {
    this.rpc = createRunClient(opts);
  }

  /** Packs `dir` (when given), uploads it, creates the run. */
  async createRun(o: CreateRunOptions): Promise<Run> {
    const { dir, maxWorkspaceBytes, ...req } = o;
    let workspace: { workspaceTar?: Uint8Array; workspaceDigest?: string } = {};
    if (dir !== undefined) {
      const packed = await packWorkspace({
        root: dir,
        maxBytes: maxWorkspaceBytes ?? 256 * 1024 * 1024,
      });
      workspace = await sendWorkspace(this.rpc, packed.archive);
    }
    const res = await this.rpc.createRun({ ...req, ...workspace });
    if (res.run === undefined) throw new Error("CreateRun answered without a run");
    return res.run;
  }

  async getRun(runId: string): Promise<Run> {
    const res = await this.rpc.getRun({ runId });
    if (res.run === undefined) throw new Error(`GetRun ${runId} answered without a run`);
    return res.run;
  }

  /**
   * The run's events after `afterSeq`, then live ones until the run ends; a dropped
   * connection is resumed from the last seq seen (each event exactly once).
   */
  async *events(
    runId: string,
    opts: { afterSeq?: bigint; signal?: AbortSignal } = {},
  ): AsyncGenerator<Event> {
    const queue: Event[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    let failure: unknown;
    const following = followEvents({
      client: this.rpc,
      runId,
      afterSeq: opts.afterSeq ?? 0n,
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
      onEvent: (ev) => {
        queue.push(ev);
        wake?.();
        return undefined;
      },
    }).then(
      () => undefined,
      (err: unknown) => {
        failure = err;
      },
    );
    void following.finally(() => {
      done = true;
      wake?.();
    });
    for (;;) {
      const ev = queue.shift();
      if (ev !== undefined) {
        yield ev;
        continue;
      }
      if (done) break;
      await new Promise<void>((r) => {
        wake = r;
      });
      wake = undefined;
    }
    if (failure !== undefined) throw failure;
  }

  /** The tenant's pending approvals, oldest first. */
  async pendingApprovals(): Promise<Approval[]> {
    return (await this.rpc.listApprovals({})).approvals;
  }

  /**
   * Approves. `rule`: also propose a rule from the approved call — "command" (its command
   * family in the run's repository) or "host" (a network approval's host) — a pending
   * policy change an admin applies (applyPolicyChange); the approval itself is a one-off.
   */
  approve(
    approvalId: string,
    reason = "",
    opts: { rule?: "command" | "host" } = {},
  ): Promise<unknown> {
    const kind =
      opts.rule === "command"
        ? ProposedRuleKind.COMMAND
        : opts.rule === "host"
          ? ProposedRuleKind.HOST
          : undefined;
    return this.rpc.resolveApproval({
      approvalId,
      decision: ApprovalDecision.APPROVE,
      reason,
      ...(kind === undefined ? {} : { proposeRule: { kind } }),
    });
  }

  deny(approvalId: string, reason: string): Promise<unknown> {
    return this.rpc.resolveApproval({ approvalId, decision: ApprovalDecision.DENY, reason });
  }

  /** Policy changes proposed from approvals, newest first (admin: `tenantId` names another tenant). */
  async policyChanges(
    opts: { tenantId?: string; pendingOnly?: boolean } = {},
  ): Promise<PolicyChange[]> {
    return (await this.rpc.listPolicyChanges(opts)).changes;
  }

  /** Writes a pending change into its tenant's policy file (admin); FAILED_PRECONDITION if the file changed since. */
  applyPolicyChange(changeId: string): Promise<ApplyPolicyChangeResponse> {
    return this.rpc.applyPolicyChange({ changeId });
  }

  /** Rejects a pending change (admin), recording why. */
  async rejectPolicyChange(changeId: string, reason: string): Promise<PolicyChange | undefined> {
    return (await this.rpc.rejectPolicyChange({ changeId, reason })).change;
  }

  /**
   * Overrides the model reviewer's verdict on a call after the fact (approve role):
   * "allow" or "deny", recorded as `reviewer.overridden` with `reason`.
   */
  async overrideReview(o: {
    runId: string;
    callId: string;
    approvalId?: string;
    verdict: "allow" | "deny";
    reason: string;
  }): Promise<ReviewOverridden | undefined> {
    return (await this.rpc.overrideReview({ ...o, approvalId: o.approvalId ?? "" })).override;
  }

  cancel(runId: string, reason = ""): Promise<unknown> {
    return this.rpc.cancelRun({ runId, reason });
  }

  /**
   * Deletes an ended run for good (events, artifacts, snapshots, listings, idempotency key);
   * `reason` is required and recorded in the tenant feed (`run.deleted`). A live run is
   * refused (FAILED_PRECONDITION: cancel it first). Deleting again finishes an interrupted one.
   */
  delete(runId: string, reason: string): Promise<DeleteRunResponse> {
    return this.rpc.deleteRun({ runId, reason });
  }

  /**
   * Deletes every ended run of a tenant (admin); refused while it has live runs. Calls
   * `onProgress` with each progress message; resolves with the last (`done` set). An
   * interrupted purge is resumed by calling it again.
   */
  async purgeTenant(
    tenantId: string,
    reason: string,
    onProgress?: (p: PurgeTenantResponse) => void,
  ): Promise<PurgeTenantResponse> {
    let last: PurgeTenantResponse | undefined;
    for await (const p of this.rpc.purgeTenant({ tenantId, reason })) {
      last = p;
      onProgress?.(p);
    }
    if (last?.done !== true)
      throw new Error(`tenant ${tenantId}: the purge stopped before it finished; call it again`);
    return last;
  }

  /** An artifact of the run ("patch", "workspace"…), whole, checked against its sha256. */
  async artifact(runId: string, name = "patch"): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let digest = "";
    for await (const res of this.rpc.getArtifact({ runId, name })) {
      if (res.part.case === "info") digest = res.part.value.digest;
      else if (res.part.case === "chunk") parts.push(res.part.value);
    }
    const data = Buffer.concat(parts);
    const actual = createHash("sha256").update(data).digest("hex");
    if (digest !== "" && actual !== digest)
      throw new Error(
        `artifact ${name} of run ${runId}: its bytes hash to ${actual}, not ${digest}`,
      );
    return data;
  }
}
