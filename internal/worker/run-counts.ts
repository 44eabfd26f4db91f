/**
 * What a run has used so far, counted from its log so that a resume or a takeover never
 * restarts a count: model steps (the last usage.updated's cumulative `steps`), wall-clock
 * time (from the first run.started, minus the time between each run.paused and the
 * run.started / run.resumed after it: a run waiting for a person does not spend its wall
 * budget; summed forward only, so that a clock behind gives nothing back), and the last
 * step's prompt size (the difference of the last two usage.updated events). Must never:
 * read a clock other than the one it is given and the events' own `ts`, count a paused
 * stretch as time used, or count less than the log's own timestamps show was spent.
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
 *
 * Each event's `ts` is the clock of the process that appended it: the time is summed step
 * by step, each step forward between one event and the next (and from the last to `nowMs`),
 * and a step backwards counts 0 — as if the event had its predecessor's time. A taker whose
 * clock is behind its predecessor's therefore never gets back what the log shows was spent:
 * the sum is at least the last timestamp minus the first (less the pauses). A clock ahead
 * counts its lead once (a budget ends early rather than late).
 */
export function wallUsedMs(events: readonly Event[], nowMs: number): number {
  let prev: number | undefined; // the last event's time, once the run started
  let paused = false; // the stretch since `prev` is a pause
  let used = 0;
  for (const ev of events) {
    if (ev.ts === undefined) continue;
    const c = ev.payload.case;
    const t = timestampMs(ev.ts);
    if (prev === undefined) {
      if (c === "runStarted" || c === "runResumed") prev = t;
      continue;
    }
    if (!paused) used += Math.max(0, t - prev);
    prev = t;
    if (c === "runPaused") paused = true;
    else if (c === "runStarted" || c === "runResumed") paused = false;
  }
  if (prev === undefined) return 0;
  return paused ? used : used + Math.max(0, nowMs - prev);
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
