/**
 * Resolving approvals from agentctl (the approve/deny commands and the inline prompt).
 *
 * Works around a server race: a decision that lands after the worker appended `run.paused`
 * but before it released the run (while it exports the workspace snapshot) is recorded,
 * yet the run is not put back on the queue (the queue still holds it as claimed and
 * ignores the enqueue; the release then parks it as paused). Such a run stays paused with
 * no pending approval. Sending the same decision again is idempotent on the server and
 * re-queues the run, so for a while after a quick decision agentctl re-sends it whenever
 * the run still sits paused without a pending approval.
 */
import { setTimeout as delay } from "node:timers/promises";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { ApprovalDecision, ProposedRuleKind } from "../gen/agentd/v1/events_pb.js";
import { type Approval, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { RunClient } from "./client.ts";

export interface Decision {
  approvalId: string;
  approve: boolean;
  reason: string;
  /** Also propose a rule from the approved call (agentctl approve --rule command|host). */
  rule?: "command" | "host";
}

export async function resolve(
  client: RunClient,
  d: Decision,
  signal?: AbortSignal,
): Promise<Approval | undefined> {
  const res = await client.resolveApproval(
    {
      approvalId: d.approvalId,
      decision: d.approve ? ApprovalDecision.APPROVE : ApprovalDecision.DENY,
      reason: d.reason,
      ...(d.rule === undefined
        ? {}
        : {
            proposeRule: {
              kind: d.rule === "command" ? ProposedRuleKind.COMMAND : ProposedRuleKind.HOST,
            },
          }),
    },
    { timeoutMs: 30_000, ...(signal === undefined ? {} : { signal }) },
  );
  return res.approval;
}

/** Decisions taken this soon after the request may have raced the worker's pause. */
const RACE_WINDOW_MS = 15_000;

/** True when a decision now may have raced the pause of the approval's run. */
export function mayRace(a: Approval | undefined, now = Date.now()): boolean {
  return a?.requestedAt === undefined || now - timestampMs(a.requestedAt) < RACE_WINDOW_MS;
}

/**
 * Re-sends decision `d` while run `runId` stays paused without a pending approval, every
 * 1.5 s, until it moves on, `done()` says so, or `budgetMs` passes. Never throws.
 */
export async function nudgeResume(
  client: RunClient,
  runId: string,
  d: Decision,
  opts: { signal?: AbortSignal; budgetMs?: number; done?: () => boolean } = {},
): Promise<void> {
  const interval = 1500;
  const until = Date.now() + (opts.budgetMs ?? 10_000);
  while (Date.now() < until) {
    await delay(interval, undefined, { signal: opts.signal }).catch(() => undefined);
    if (opts.signal?.aborted || opts.done?.()) return;
    try {
      const { run } = await client.getRun({ runId }, { timeoutMs: 5000 });
      if (run === undefined || run.state !== RunState.PAUSED || run.pendingApprovalId !== "")
        return;
      await resolve(client, d);
    } catch {
      return;
    }
  }
}
