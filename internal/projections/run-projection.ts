/**
 * The Run projection: a run's state, timestamps and counters folded from its events.
 * Pure: the same events always give the same Run. Never reads storage.
 */
import { clone, create } from "@bufbuild/protobuf";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { type Run, RunSchema, RunState } from "../gen/agentd/v1/run_service_pb.js";

/** States a run never leaves. */
export const TERMINAL_STATES: ReadonlySet<RunState> = new Set([
  RunState.COMPLETED,
  RunState.FAILED,
  RunState.CANCELLED,
]);

export function isTerminal(state: RunState): boolean {
  return TERMINAL_STATES.has(state);
}

/** The projection of a run with no events yet. */
export function emptyRun(runId: string): Run {
  return create(RunSchema, { runId });
}

/** Folds one event into `run` (mutated and returned). Events must come in seq order. */
export function applyEvent(run: Run, ev: Event): Run {
  run.lastSeq = ev.seq;
  run.eventCount = ev.seq;
  run.lastHash = ev.hash;
  if (ev.ts !== undefined) run.updatedAt = ev.ts;
  const terminal = isTerminal(run.state);
  const p = ev.payload;
  switch (p.case) {
    case "runQueued":
      run.runId = ev.runId;
      run.sessionId = ev.sessionId;
      run.tenantId = p.value.tenantId;
      run.state = RunState.QUEUED;
      run.prompt = p.value.prompt;
      run.priority = p.value.priority;
      run.skills = [...p.value.skills];
      run.labels = { ...p.value.labels };
      run.workspaceDigest = p.value.workspaceDigest;
      if (p.value.budget !== undefined) run.budget = p.value.budget;
      run.createdAt = ev.ts;
      break;
    case "usageUpdated":
      // Live usage while the run runs; what a cancelled run (or a crashed drive) keeps.
      if (terminal) break;
      if (p.value.usage !== undefined) run.usage = p.value.usage;
      run.costMicros = p.value.costMicros;
      break;
    case "runStarted":
    case "runResumed":
      if (terminal) break;
      run.state = RunState.RUNNING;
      run.startedAt ??= ev.ts;
      run.pendingApprovalId = "";
      break;
    case "runPaused":
      if (terminal) break;
      run.state = RunState.PAUSED;
      run.pendingApprovalId = p.value.approvalId;
      if (p.value.usage !== undefined) run.usage = p.value.usage;
      break;
    case "runCompleted":
      if (terminal) break;
      end(run, RunState.COMPLETED, ev);
      run.summary = p.value.summary;
      run.usage = p.value.usage;
      run.costMicros = p.value.costMicros;
      break;
    case "runFailed":
      if (terminal) break;
      end(run, RunState.FAILED, ev);
      run.error = p.value.error;
      run.usage = p.value.usage;
      run.costMicros = p.value.costMicros;
      break;
    case "runCancelled":
      if (terminal) break;
      end(run, RunState.CANCELLED, ev);
      break;
    case "runCancelRequested":
      run.cancelRequested = true;
      break;
    case "toolCall":
      run.toolCallCount += 1n;
      break;
    case "approvalRequested":
      run.approvalCount += 1n;
      break;
    case "approvalResolved":
      // Still paused, but resumable: the decision it waited for is there.
      if (run.pendingApprovalId === p.value.approvalId) run.pendingApprovalId = "";
      break;
    default:
      break;
  }
  return run;
}

/** A terminal transition: the state, when it ended, and no approval pending any more. */
function end(run: Run, state: RunState, ev: Event): void {
  run.state = state;
  run.endedAt = ev.ts;
  run.pendingApprovalId = "";
}

/** Projects a run from its whole log. */
export function projectRun(runId: string, events: Iterable<Event>): Run {
  const run = emptyRun(runId);
  for (const ev of events) applyEvent(run, ev);
  return run;
}

/** A copy safe to hand out (the cache keeps mutating its own). */
export function snapshotRun(run: Run): Run {
  return clone(RunSchema, run);
}
