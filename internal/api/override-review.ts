/**
 * OverrideReview: a person (role approve) overrides the model reviewer's verdict on a call
 * after the fact. The override is a record, never an effect: it appends
 * `reviewer.overridden` (who, why, the reviewer's verdict and theirs) to the run's log
 * with a compare-and-append on the head it read, and runs or undoes nothing.
 *
 * - Overriding an allow (the call already ran, or started) with deny sets `attention`:
 *   the run holds an effect a person disagrees with, and every reader sees it flagged.
 * - Overriding a deny with allow records that the reviewer was wrong; the call stays
 *   refused (the model was told so and may propose it again, which the kernel decides
 *   afresh). Running a call outside the kernel's path would break invariant 2.
 * - An ask whose approval is still pending is answered with ResolveApproval, not here
 *   (FAILED_PRECONDITION naming it); once resolved it can be overridden like the others.
 * - A run that ended has a closed log: the override goes to the tenant feed instead (a
 *   notice, seq 0, as policy.changed), so it is still recorded where watchers see it.
 *
 * Must never: override a verdict of another tenant's run (NOT_FOUND, as for any run),
 * accept a verdict other than allow or deny, or take a reason-less override.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { AgentdError, invalid, isAgentdError } from "../errors.ts";
import { sealEvent, TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { isRunEnded } from "../eventlog/run-ended-error.ts";
import {
  type Event,
  type ReviewerVerdict,
  type ReviewOverridden,
  ReviewOverriddenSchema,
} from "../gen/agentd/v1/events_pb.js";
import type {
  OverrideReviewRequest,
  OverrideReviewResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { projectApprovals, runIdOfApproval } from "../projections/approvals.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { annotateRpc } from "./interceptors/tracing.ts";
import { textField } from "./validate.ts";

const RETRIES = 5;
const MAX_CALL_ID = 256;

export function overrideReviewHandler(deps: ApiDeps, now: () => number = Date.now) {
  return async (
    req: OverrideReviewRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof OverrideReviewResponseSchema>> => {
    const principal = principalOf(ctx);
    const target = targetOf(req);
    annotateRpc(ctx.values, {
      "agentd.run.id": target.runId,
      "agentd.review.verdict": req.verdict,
    });
    for (let attempt = 0; ; attempt++) {
      const { head } = await runOf(deps, principal, target.runId);
      const events = (await deps.log.read(target.runId, 0)).map((e) => e.event);
      const verdict = findVerdict(events, target);
      const override = overrideOf(events, verdict, req, principal.name);
      if (events.some((e) => TERMINAL_TYPES.has(e.type))) {
        const json = sealEvent(
          {
            runId: target.runId,
            sessionId: head.sessionId,
            payload: { case: "reviewerOverridden", value: override },
          },
          0,
          GENESIS_HASH,
          now(),
        ).json;
        await deps.log.publish(principal.tenantId, target.runId, json);
        return { override, seq: 0n };
      }
      try {
        const logged = await deps.log.append({
          runId: target.runId,
          sessionId: head.sessionId,
          expectedSeq: head.seq,
          payload: { case: "reviewerOverridden", value: override },
        });
        return { override, seq: BigInt(logged.seq) };
      } catch (err) {
        // The run moved (or ended) between our read and our append: read again.
        if (isRunEnded(err)) continue;
        if (!isAgentdError(err, "ECONFLICT") || attempt >= RETRIES) throw err;
      }
    }
  };
}

interface Target {
  runId: string;
  callId: string;
  approvalId: string;
}

function targetOf(req: OverrideReviewRequest): Target {
  if (req.verdict !== "allow" && req.verdict !== "deny")
    throw invalid(
      "verdict",
      `must be "allow" or "deny", got ${JSON.stringify(req.verdict.slice(0, 64))}`,
    );
  textField("reason", req.reason, 4096, true);
  textField("call_id", req.callId, MAX_CALL_ID);
  if (req.approvalId !== "") {
    const runId = runIdOfApproval(req.approvalId);
    if (runId === undefined) throw invalid("approval_id", "is not an approval id (apr_<run>_<id>)");
    if (req.runId !== "" && req.runId !== runId)
      throw invalid("run_id", "names another run than approval_id does");
    return { runId, callId: req.callId, approvalId: req.approvalId };
  }
  if (req.callId === "") throw invalid("call_id", "is required (or give approval_id)");
  if (req.runId === "") throw invalid("run_id", "is required with call_id");
  return { runId: req.runId, callId: req.callId, approvalId: "" };
}

/** The last reviewer.verdict of the target's call (or approval); NOT_FOUND when none. */
function findVerdict(events: Event[], t: Target): ReviewerVerdict {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case !== "reviewerVerdict") continue;
    if (t.approvalId !== "" ? p.value.approvalId === t.approvalId : p.value.callId === t.callId)
      return p.value;
  }
  const what = t.approvalId !== "" ? `approval ${t.approvalId}` : `call ${t.callId}`;
  throw new AgentdError("ENOTFOUND", `no reviewer verdict for ${what} in run ${t.runId}`);
}

function overrideOf(
  events: Event[],
  v: ReviewerVerdict,
  req: OverrideReviewRequest,
  by: string,
): ReviewOverridden {
  if (v.verdict === "ask" && v.approvalId !== "") {
    const a = projectApprovals(events).get(v.approvalId);
    if (a?.state === "pending")
      throw new AgentdError(
        "ECONFLICT",
        `the reviewer asked a person in approval ${v.approvalId}, which is still pending: resolve it with ResolveApproval`,
      );
  }
  if (v.verdict === req.verdict)
    throw invalid(
      "verdict",
      `is the reviewer's verdict already (${v.verdict}): nothing to override`,
    );
  const ran = events.some(
    (e) => e.payload.case === "toolStarted" && e.payload.value.callId === v.callId,
  );
  return create(ReviewOverriddenSchema, {
    callId: v.callId,
    approvalId: v.approvalId,
    previousVerdict: v.verdict,
    verdict: req.verdict,
    reason: req.reason,
    overriddenBy: by,
    attention: v.verdict === "allow" && req.verdict === "deny" && ran,
  });
}
