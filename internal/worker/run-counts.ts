/**
 * What a run has used so far, counted from its log so that a resume or a takeover never
 * restarts a count: model steps (the last usage.updated's cumulative `steps`), wall-clock
 * time (from the first run.started, minus the time between each run.paused and the
 * run.started / run.resumed after it: a run waiting for a person does not spend its wall
 * budget), and the last step's prompt size (the difference of the last two usage.updated
 * events). Must never: read a clock other than the one it is given and the events' own
 * `ts`, or count a paused stretch as time used.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Event } from "../gen/agentd/v1/events_pb.js";

/** Model steps of the run, all drives together (the last usage.updated says). */
export function stepsSoFar(events: readonly Event[]): number {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "usageUpdated") return p.value.steps;
  }
  return 0;
}

/**
 * Wall-clock ms the run has used at `nowMs`: since its first run.started, less every paused
 * stretch (run.paused until the next run.started / run.resumed). A run paused now counts
 * only up to its pause. Time between a lost owner and its takeover counts: the run was not
 * waiting for a person. 0 before the run started.
 */
export function wallUsedMs(events: readonly Event[], nowMs: number): number {
  let start: number | undefined;
  let pausedAt: number | undefined;
  let paused = 0;
  for (const ev of events) {
    const c = ev.payload.case;
    if (ev.ts === undefined) continue;
    const t = timestampMs(ev.ts);
    if (c === "runStarted" || c === "runResumed") {
      start ??= t;
      if (pausedAt !== undefined) paused += Math.max(0, t - pausedAt);
      pausedAt = undefined;
    } else if (c === "runPaused" && start !== undefined) pausedAt ??= t;
  }
  if (start === undefined) return 0;
  return Math.max(0, (pausedAt ?? nowMs) - start - paused);
}

/**
 * The input tokens the provider reported for the run's last model step, when the next
 * prompt is known to be at least that large: it holds the same system prompt, tools and
 * messages plus what came since — unless the context was compacted (checkpoint.created)
 * after that step. Undefined when not knowable.
 */
export function lastPromptTokens(events: readonly Event[]): number | undefined {
  let last: bigint | undefined;
  let before = 0n;
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]?.payload;
    if (p?.case === "checkpointCreated" && last === undefined) return undefined;
    if (p?.case !== "usageUpdated") continue;
    const input = p.value.usage?.inputTokens ?? 0n;
    if (last === undefined) last = input;
    else {
      before = input;
      break;
    }
  }
  return last === undefined ? undefined : Number(last - before);
}
