/**
 * ResolveApproval and ListApprovals. Approvals are projections of the run's events; the
 * server appends `approval.resolved` with a compare-and-append on the head it read, so two
 * racing resolutions cannot both land. The same decision twice is fine (idempotent), a
 * conflicting one is FAILED_PRECONDITION. An approval past its expiry is denied
 * automatically when it is next looked at, and its paused run goes back on the queue (the
 * model then gets the denial), as after any resolution.
 *
 * Terminal is terminal: an ended run's approvals are never resolved (FAILED_PRECONDITION,
 * EENDED, naming how the run ended), never listed, and never denied by expiry.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { AgentdError, invalid, isAgentdError } from "../errors.ts";
import { TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { isRunEnded } from "../eventlog/run-ended-error.ts";
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
import { isTerminal } from "../projections/run-projection.ts";
import { resumeIfResolved } from "../scheduler/resume.ts";
import { observeApprovalWait } from "../telemetry/event-metrics.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { annotateRpc } from "./interceptors/tracing.ts";
import { finishProposal, prepareProposal, ruleRequest } from "./propose-rule.ts";
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
 * run re-enqueued so that a worker resumes it with the denial). A run that ended is only
 * reported as such (`endedBy`): nothing is appended to it, and none of its approvals is
 * pending any more, whatever its events say.
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
  /** The terminal event's type once the run ended. */
  endedBy: string | undefined;
}> {
  let denied = 0;
  for (let attempt = 0; ; attempt++) {
    const { head } = await runOf(deps, principal, runId);
    const events = (await deps.log.read(runId, 0)).map((e) => e.event);
    const approvals = projectApprovals(events);
    // From the events just read (they may go past the head read before them).
    const endedBy = events.find((e) => TERMINAL_TYPES.has(e.type))?.type;
    const base = { approvals, headSeq: head.seq, sessionId: head.sessionId, denied, endedBy };
    if (endedBy !== undefined) return base;
    const expired = [...approvals.values()].find(
      (a) => a.state === "pending" && a.expiresAt !== undefined && timestampMs(a.expiresAt) <= now,
    );
    if (expired === undefined) return base;
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
      // The run ended meanwhile (EENDED): not an error, the next look reports it ended.
      if (isRunEnded(err)) continue;
      if (!isAgentdError(err, "ECONFLICT") || attempt >= RETRIES) throw err;
      continue;
    }
    denied++;
    observeApprovalWait(expired.requestedAt, ApprovalDecision.DENY, true, now);
    await requeue(deps, principal, runId);
  }
}

/** Paused runs looked at per sweep at most (longest paused first). */
const SWEEP_MAX_RUNS = 5000;

/**
 * The background sweep of `agentd server` over the queue's paused runs (pausedRuns, so the
 * cost follows the runs waiting for a person, not all runs): an approval past its expiry is
 * denied and its run re-enqueued (as looking at it would), and a paused run whose approval
 * was resolved but which never went back on the queue (a failed enqueue after the
 * resolution landed) is re-enqueued. Several servers may sweep at once: each denial is a
 * compare-and-append, and enqueueing a run that is already back is a no-op. A failing run is
 * reported to `onError` and skipped; `signal` stops the sweep between runs. A listed run
 * that has ended (or that the log does not know) is dropped from the queue; one that ends
 * while it is swept is left alone (the log refuses the denial: EENDED is no error here).
 */
export async function sweepPausedRuns(
  deps: ApiDeps,
  opts: { signal?: AbortSignal; onError?: (runId: string, err: unknown) => void } = {},
): Promise<{ denied: number; requeued: number; dropped: number }> {
  const out = { denied: 0, requeued: 0, dropped: 0 };
  if (deps.queue === undefined) return out;
  const now = Date.now();
  for (const runId of await deps.queue.pausedRuns(SWEEP_MAX_RUNS)) {
    if (opts.signal?.aborted) break;
    try {
      const run = await deps.runs.get(runId);
      if (run === undefined || isTerminal(run.state)) {
        // Ended (a CancelRun whose queue removal failed) or unknown: not waiting for anyone.
        if (await deps.queue.cancelQueued(runId)) out.dropped++;
        continue;
      }
      if (run.state !== RunState.PAUSED) continue;
      const principal: Principal = {
        name: "expiry",
        tenantId: run.tenantId,
        roles: new Set(["approve"]),
      };
      if (run.pendingApprovalId !== "") {
        const seen = await approvalsOf(deps, principal, runId, now);
        out.denied += seen.denied;
        if (seen.endedBy !== undefined && (await deps.queue.cancelQueued(runId))) out.dropped++;
      } else if (await requeue(deps, principal, runId)) out.requeued++;
    } catch (err) {
      opts.onError?.(runId, err);
    }
  }
  return out;
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
    const rule = ruleRequest(deps, req.proposeRule, req.decision);
    const wanted = req.decision === ApprovalDecision.APPROVE ? "approved" : "denied";
    annotateRpc(ctx.values, {
      "agentd.run.id": runId,
      "agentd.approval.id": req.approvalId,
      "agentd.approval.decision": wanted,
    });
    for (let attempt = 0; ; attempt++) {
      const { approvals, headSeq, sessionId, endedBy } = await approvalsOf(
        deps,
        principal,
        runId,
        now(),
      );
      const a = approvals.get(req.approvalId);
      if (a === undefined)
        throw new AgentdError("ENOTFOUND", `approval ${req.approvalId} not found`);
      // A rule from a call a person did approve may still be proposed once the run ended
      // (again, after the first went stale): nothing is appended to the run or resumed.
      if (endedBy !== undefined && rule !== undefined && a.state === "approved") {
        await finishProposal(rule, await prepareProposal(deps, principal, rule, a));
        return { approval: toMessage(a) };
      }
      // Terminal is terminal: nothing is approved for an ended run, whatever was decided.
      if (endedBy !== undefined) throw endedError(req.approvalId, runId, endedBy);
      if (a.state !== "pending") {
        // Resolved already (by a person, or by expiry): the run must be able to go on,
        // whatever this caller wanted.
        await requeue(deps, principal, runId);
        if (a.state === wanted) {
          // A retry after a failure past the append: the change is stored (idempotent).
          if (rule !== undefined)
            await finishProposal(rule, await prepareProposal(deps, principal, rule, a));
          return { approval: toMessage(a) };
        }
        throw new AgentdError(
          "ECONFLICT",
          `approval ${req.approvalId} was already ${a.state}${a.resolvedBy === "expiry" ? " (it expired)" : ` by ${a.resolvedBy}`}`,
        );
      }
      // The rule first: a call that cannot give one refuses the request, nothing resolved.
      const proposal =
        rule === undefined ? undefined : await prepareProposal(deps, principal, rule, a);
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
              policyChangeId: proposal?.change.id ?? "",
              // The person answered a call the model reviewer had an opinion on.
              reviewerVerdict: a.reviewerVerdict ?? "",
            }),
          },
        });
      } catch (err) {
        // Another event landed between our read and our append (or the run ended: the
        // next look says so): read again and decide again.
        if (isRunEnded(err)) continue;
        if (!isAgentdError(err, "ECONFLICT") || attempt >= RETRIES) throw err;
        continue;
      }
      observeApprovalWait(a.requestedAt, req.decision, false, now());
      await requeue(deps, principal, runId);
      // After the requeue: the run goes on whatever happens to the proposal (a failure
      // here is answered as an error; a retry finds the approval resolved and stores it).
      if (rule !== undefined && proposal !== undefined) await finishProposal(rule, proposal);
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

/** ResolveApproval of an ended run's approval: FAILED_PRECONDITION naming how it ended. */
function endedError(approvalId: string, runId: string, endedBy: string): AgentdError {
  return new AgentdError(
    "EENDED",
    `approval ${approvalId} can no longer be resolved: run ${runId} already ended (${endedBy})`,
  );
}

/**
 * A resolved approval's paused run goes back on the queue, so any worker resumes it. True
 * when this call made it claimable again.
 */
async function requeue(deps: ApiDeps, principal: Principal, runId: string): Promise<boolean> {
  if (deps.queue === undefined) return false;
  const { run } = await runOf(deps, principal, runId);
  return resumeIfResolved(deps.queue, run);
}

/**
 * The pending approvals to list: none of a run that ended (an ended run waits for nobody;
 * its unanswered approvals are not listed at all rather than listed as something else).
 */
function pendingOf(approvals: Map<string, Projected>, endedBy: string | undefined): Approval[] {
  if (endedBy !== undefined) return [];
  return [...approvals.values()].filter((a) => a.state === "pending").map(toMessage);
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
      const { approvals, endedBy } = await approvalsOf(deps, principal, req.runId, now());
      return { approvals: pendingOf(approvals, endedBy), nextPageToken: "" };
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
        const { approvals, endedBy } = await approvalsOf(deps, principal, r.runId, now());
        out.push(...pendingOf(approvals, endedBy));
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
