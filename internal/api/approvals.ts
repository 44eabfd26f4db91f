/**
 * ResolveApproval and ListApprovals. Approvals are projections of the run's events; the
 * server appends `approval.resolved` with a compare-and-append on the head it read, so two
 * racing resolutions cannot both land. The same decision twice is fine (idempotent), a
 * conflicting one is FAILED_PRECONDITION. An approval past its expiry is denied
 * automatically when it is next looked at, and its paused run goes back on the queue (the
 * model then gets the denial), as after any resolution.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { AgentdError, invalid, isAgentdError } from "../errors.ts";
import { ApprovalDecision, ApprovalResolvedSchema } from "../gen/agentd/v1/events_pb.js";
import {
  type Approval,
  ApprovalSchema,
  ApprovalState,
  type ListApprovalsRequest,
  type ListApprovalsResponseSchema,
  type ResolveApprovalRequest,
  type ResolveApprovalResponseSchema,
  RunState,
} from "../gen/agentd/v1/run_service_pb.js";
import {
  type ApprovalState as Projected,
  projectApprovals,
  runIdOfApproval,
} from "../projections/approvals.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { decodePageToken, encodePageToken, pageSizeField, textField } from "./validate.ts";

const RETRIES = 5;

function toMessage(a: Projected): Approval {
  return create(ApprovalSchema, {
    approvalId: a.approvalId,
    runId: a.runId,
    callId: a.callId,
    tool: a.tool,
    ...(a.preview === undefined ? {} : { preview: a.preview }),
    state:
      a.state === "pending"
        ? ApprovalState.PENDING
        : a.state === "approved"
          ? ApprovalState.APPROVED
          : ApprovalState.DENIED,
    ...(a.requestedAt === undefined ? {} : { requestedAt: a.requestedAt }),
    ...(a.expiresAt === undefined ? {} : { expiresAt: a.expiresAt }),
    reason: a.reason,
    resolvedBy: a.resolvedBy,
  });
}

/**
 * The run's approvals, with expired pending ones denied first (appended, then re-read; the
 * run re-enqueued so that a worker resumes it with the denial).
 */
async function approvalsOf(
  deps: ApiDeps,
  principal: Principal,
  runId: string,
  now: number,
): Promise<{
  approvals: Map<string, Projected>;
  headSeq: number;
  sessionId: string;
  /** Approvals this call denied for their expiry. */
  denied: number;
}> {
  let denied = 0;
  for (let attempt = 0; ; attempt++) {
    const { head } = await runOf(deps, principal, runId);
    const events = (await deps.log.read(runId, 0)).map((e) => e.event);
    const approvals = projectApprovals(events);
    const expired = [...approvals.values()].find(
      (a) => a.state === "pending" && a.expiresAt !== undefined && timestampMs(a.expiresAt) <= now,
    );
    if (expired === undefined)
      return { approvals, headSeq: head.seq, sessionId: head.sessionId, denied };
    try {
      await deps.log.append({
        runId,
        sessionId: head.sessionId,
        expectedSeq: head.seq,
        payload: {
          case: "approvalResolved",
          value: create(ApprovalResolvedSchema, {
            approvalId: expired.approvalId,
            decision: ApprovalDecision.DENY,
            reason: "the approval expired",
            resolvedBy: "expiry",
          }),
        },
      });
    } catch (err) {
      if (!isAgentdError(err, "ECONFLICT") || attempt >= RETRIES) throw err;
      continue;
    }
    denied++;
    await requeue(deps, principal, runId);
  }
}

/** Runs looked at per tenant and sweep, newest first (like ListApprovals' bound). */
const SWEEP_MAX_RUNS = 5000;

/**
 * Denies the expired pending approvals of these tenants' paused runs and re-enqueues the
 * runs (as looking at them would): the background sweep of `agentd server`, so a run
 * nobody looks at does not stay paused past its approval's expiry. Several servers may
 * sweep at once (each denial is a compare-and-append). A failing run is reported to
 * `onError` and skipped. Returns how many approvals it denied.
 */
export async function sweepExpiredApprovals(
  deps: ApiDeps,
  tenants: readonly string[],
  opts: { now?: number; onError?: (runId: string, err: unknown) => void } = {},
): Promise<number> {
  const now = opts.now ?? Date.now();
  let denied = 0;
  for (const tenantId of tenants) {
    const principal: Principal = { name: "expiry", tenantId, roles: new Set(["approve"]) };
    let before: string | undefined;
    for (let examined = 0; examined < SWEEP_MAX_RUNS; ) {
      const page = await deps.log.listRunIds({ tenantId, before, limit: 200 });
      const runs = await deps.runs.getMany(page.runIds);
      for (const r of runs) {
        if (r === undefined || r.state !== RunState.PAUSED || r.pendingApprovalId === "") continue;
        try {
          denied += (await approvalsOf(deps, principal, r.runId, now)).denied;
        } catch (err) {
          opts.onError?.(r.runId, err);
        }
      }
      examined += page.runIds.length;
      if (page.next === undefined) break;
      before = page.next;
    }
  }
  return denied;
}

export function resolveApprovalHandler(deps: ApiDeps, now: () => number = Date.now) {
  return async (
    req: ResolveApprovalRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof ResolveApprovalResponseSchema>> => {
    const principal = principalOf(ctx);
    if (req.approvalId === "") throw invalid("approval_id", "is required");
    const runId = runIdOfApproval(req.approvalId);
    if (runId === undefined) throw invalid("approval_id", "is not an approval id (apr_<run>_<id>)");
    if (req.decision !== ApprovalDecision.APPROVE && req.decision !== ApprovalDecision.DENY) {
      throw invalid("decision", "must be APPROVAL_DECISION_APPROVE or APPROVAL_DECISION_DENY");
    }
    textField("reason", req.reason, 4096);
    const wanted = req.decision === ApprovalDecision.APPROVE ? "approved" : "denied";
    for (let attempt = 0; ; attempt++) {
      const { approvals, headSeq, sessionId } = await approvalsOf(deps, principal, runId, now());
      const a = approvals.get(req.approvalId);
      if (a === undefined)
        throw new AgentdError("ENOTFOUND", `approval ${req.approvalId} not found`);
      if (a.state !== "pending") {
        if (a.state === wanted) {
          await requeue(deps, principal, runId);
          return { approval: toMessage(a) };
        }
        throw new AgentdError(
          "ECONFLICT",
          `approval ${req.approvalId} was already ${a.state}${a.resolvedBy === "expiry" ? " (it expired)" : ` by ${a.resolvedBy}`}`,
        );
      }
      try {
        await deps.log.append({
          runId,
          sessionId,
          expectedSeq: headSeq,
          payload: {
            case: "approvalResolved",
            value: create(ApprovalResolvedSchema, {
              approvalId: a.approvalId,
              decision: req.decision,
              reason: req.reason,
              resolvedBy: principal.name,
            }),
          },
        });
      } catch (err) {
        // Another event landed between our read and our append: read again and decide again.
        if (!isAgentdError(err, "ECONFLICT") || attempt >= RETRIES) throw err;
        continue;
      }
      await requeue(deps, principal, runId);
      return {
        approval: toMessage({
          ...a,
          state: wanted,
          reason: req.reason,
          resolvedBy: principal.name,
        }),
      };
    }
  };
}

/** A resolved approval's paused run goes back on the queue, so any worker resumes it. */
async function requeue(deps: ApiDeps, principal: Principal, runId: string): Promise<void> {
  if (deps.queue === undefined) return;
  const { run } = await runOf(deps, principal, runId);
  if (run.state === RunState.PAUSED && run.pendingApprovalId === "") {
    await deps.queue.enqueue({
      runId,
      tenantId: run.tenantId,
      sessionId: run.sessionId,
      priority: run.priority,
    });
  }
}

/** Runs looked at per ListApprovals call (paused runs hold the pending approvals). */
const MAX_EXAMINED = 5000;

export function listApprovalsHandler(deps: ApiDeps, now: () => number = Date.now) {
  return async (
    req: ListApprovalsRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof ListApprovalsResponseSchema>> => {
    const principal = principalOf(ctx);
    const pageSize = pageSizeField("page_size", req.pageSize, 50, 500);
    if (req.runId !== "") {
      const { approvals } = await approvalsOf(deps, principal, req.runId, now());
      return {
        approvals: [...approvals.values()].filter((a) => a.state === "pending").map(toMessage),
        nextPageToken: "",
      };
    }
    const binding = { k: "approvals" };
    let before =
      req.pageToken === "" ? undefined : decodePageToken("page_token", req.pageToken, binding).b;
    const out: Approval[] = [];
    let examined = 0;
    for (;;) {
      const page = await deps.log.listRunIds({ tenantId: principal.tenantId, before, limit: 200 });
      const runs = await deps.runs.getMany(page.runIds);
      for (let i = 0; i < runs.length; i++) {
        examined++;
        const r = runs[i];
        before = page.runIds[i];
        if (r === undefined || r.state !== RunState.PAUSED) continue;
        const { approvals } = await approvalsOf(deps, principal, r.runId, now());
        for (const a of approvals.values()) if (a.state === "pending") out.push(toMessage(a));
        if (out.length >= pageSize) {
          const more = i + 1 < runs.length || page.next !== undefined;
          return {
            approvals: out,
            nextPageToken: more ? encodePageToken({ ...binding, b: before as string }) : "",
          };
        }
      }
      if (page.next === undefined) return { approvals: out, nextPageToken: "" };
      if (examined >= MAX_EXAMINED)
        return {
          approvals: out,
          nextPageToken: encodePageToken({ ...binding, b: before as string }),
        };
    }
  };
}
