/**
 * Approvals of a run, projected from its events: requested, then resolved (by a person or
 * by expiry). Pure.
 */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { ApprovalDecision, type Event, type Preview } from "../gen/agentd/v1/events_pb.js";

export interface ApprovalState {
  approvalId: string;
  runId: string;
  callId: string;
  tool: string;
  preview: Preview | undefined;
  requestedAt: Timestamp | undefined;
  expiresAt: Timestamp | undefined;
  /** Seq of the approval.requested event. */
  requestedSeq: number;
  state: "pending" | "approved" | "denied";
  reason: string;
  resolvedBy: string;
  /** What the model reviewer said before a person was asked ("" or absent: no reviewer). */
  reviewerVerdict?: string;
}

export function projectApprovals(events: Iterable<Event>): Map<string, ApprovalState> {
  const out = new Map<string, ApprovalState>();
  for (const ev of events) {
    const p = ev.payload;
    if (p.case === "approvalRequested") {
      out.set(p.value.approvalId, {
        approvalId: p.value.approvalId,
        runId: ev.runId,
        callId: p.value.callId,
        tool: p.value.tool,
        preview: p.value.preview,
        requestedAt: ev.ts,
        expiresAt: p.value.expiresAt,
        requestedSeq: Number(ev.seq),
        state: "pending",
        reason: "",
        resolvedBy: "",
        reviewerVerdict: p.value.reviewerVerdict,
      });
    } else if (p.case === "approvalResolved") {
      const a = out.get(p.value.approvalId);
      // The first resolution counts; the log never holds a second (the server checks).
      if (a !== undefined && a.state === "pending") {
        a.state = p.value.decision === ApprovalDecision.APPROVE ? "approved" : "denied";
        a.reason = p.value.reason;
        a.resolvedBy = p.value.resolvedBy;
      }
    }
  }
  return out;
}

/** Approval ids carry their run: apr_<RUN ULID>_<ULID>. */
export const APPROVAL_ID_RE = /^apr_([0-9A-HJKMNP-TV-Z]{26})_([0-9A-HJKMNP-TV-Z]{26})$/;

export function runIdOfApproval(approvalId: string): string | undefined {
  return APPROVAL_ID_RE.exec(approvalId)?.[1];
}
