/**
 * A model step's calls whose id the run already used (an earlier tool.call in the log, or
 * an earlier call of the same step). The log pairs a call with its decision, approval and
 * result by id: a second call under a used id would be taken for the first (an approved
 * call waiting to run would look answered and never run). Such a call is answered as a
 * malformed call, under a fresh id no event of the run holds, and the earlier call keeps its
 * id, decision and result.
 *
 * Ids agentd makes itself carry a reserved prefix (RESERVED_ID_PREFIXES: `setup_` for the
 * setup step's calls, `reused_` and `renamed_` for the fresh ids made here): a model call
 * under such an id would take the id agentd gives its next call of that kind. It goes on
 * (it may run) under a fresh `renamed_` id instead; the model sees that id in its history,
 * rebuilt from the log. Must never: give two tool.call events of a run the same id, or
 * record a model call under a reserved prefix.
 */
import { createHash } from "node:crypto";
import type { EngineToolCall } from "../engine/port.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";

export interface MalformedCall {
  callId: string;
  tool: string;
  input: unknown;
  error: { code: string; message: string };
}

/** Prefixes of the call ids agentd itself makes; a model's call never keeps one. */
export const RESERVED_ID_PREFIXES = ["setup_", "reused_", "renamed_"] as const;

/** Whether `id` has a prefix agentd keeps for its own calls. */
export const isReservedId = (id: string): boolean =>
  RESERVED_ID_PREFIXES.some((p) => id.startsWith(p));

/** Every call id of the run's log (tool.call events). */
export function usedCallIds(events: readonly Event[]): Set<string> {
  const ids = new Set<string>();
  for (const e of events) if (e.payload.case === "toolCall") ids.add(e.payload.value.callId);
  return ids;
}

/**
 * Splits a step's calls: those under an unused id go on (their ids are added to `used`),
 * the rest become malformed calls under fresh ids. `bad` (calls the model got wrong
 * otherwise) get fresh ids too when theirs is used, by the log or by a call of the step
 * that can run (that one keeps the id, as it is the one a decision may follow). A call
 * under a reserved id (isReservedId) is renamed first, and then judged as any other.
 */
export function separateReusedIds(
  used: Set<string>,
  calls: readonly EngineToolCall[],
  bad: readonly MalformedCall[],
): { calls: EngineToolCall[]; bad: MalformedCall[] } {
  const out = { calls: [] as EngineToolCall[], bad: [] as MalformedCall[] };
  for (const model of calls) {
    const c = isReservedId(model.callId) ? { ...model, callId: renamed(model.callId) } : model;
    if (!used.has(c.callId)) {
      used.add(c.callId);
      out.calls.push(c);
      continue;
    }
    const callId = freshId(used, c.callId, "reused_");
    used.add(callId);
    out.bad.push({
      callId,
      tool: c.tool,
      input: c.input,
      error: {
        code: "EVALIDATION",
        message: `callId: the id ${model.callId}${c === model ? "" : ` (recorded as ${c.callId})`} is already used by an earlier call of this run; this call did not run (answered under the new id ${callId}); give every call a new id`,
      },
    });
  }
  // Malformed calls come last: a call that can run keeps an id a malformed one shares.
  for (const model of bad) {
    const b = isReservedId(model.callId) ? { ...model, callId: renamed(model.callId) } : model;
    const callId = used.has(b.callId) ? freshId(used, b.callId, "reused_") : b.callId;
    used.add(callId);
    out.bad.push({ ...b, callId });
  }
  return out;
}

/**
 * The id a model's call under a reserved id is recorded under: derived from it alone, so
 * that the same id given twice is caught as a reuse like any other.
 */
const renamed = (id: string): string =>
  `renamed_${createHash("sha256").update(id).digest("hex").slice(0, 16)}`;

/** An id derived from `id` that no call of the run holds (stable for one log). */
function freshId(used: ReadonlySet<string>, id: string, prefix: string): string {
  for (let n = 1; ; n++) {
    const digest = createHash("sha256").update(`${id}\u0000${n}`).digest("hex").slice(0, 16);
    const candidate = `${prefix}${digest}`;
    if (!used.has(candidate)) return candidate;
  }
}
