/**
 * A model step's calls whose id the run already used (an earlier tool.call in the log, or
 * an earlier call of the same step). The log pairs a call with its decision, approval and
 * result by id: a second call under a used id would be taken for the first (an approved
 * call waiting to run would look answered and never run). Such a call is answered as a
 * malformed call, under a fresh id no event of the run holds, and the earlier call keeps its
 * id, decision and result. Must never: give two tool.call events of a run the same id.
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
 * that can run (that one keeps the id, as it is the one a decision may follow).
 */
export function separateReusedIds(
  used: Set<string>,
  calls: readonly EngineToolCall[],
  bad: readonly MalformedCall[],
): { calls: EngineToolCall[]; bad: MalformedCall[] } {
  const out = { calls: [] as EngineToolCall[], bad: [] as MalformedCall[] };
  for (const c of calls) {
    if (!used.has(c.callId)) {
      used.add(c.callId);
      out.calls.push(c);
      continue;
    }
    const callId = freshId(used, c.callId);
    used.add(callId);
    out.bad.push({
      callId,
      tool: c.tool,
      input: c.input,
      error: {
        code: "EVALIDATION",
        message: `callId: the id ${c.callId} is already used by an earlier call of this run; this call did not run (answered under the new id ${callId}); give every call a new id`,
      },
    });
  }
  // Malformed calls come last: a call that can run keeps an id a malformed one shares.
  for (const b of bad) {
    const callId = used.has(b.callId) ? freshId(used, b.callId) : b.callId;
    used.add(callId);
    out.bad.push({ ...b, callId });
  }
  return out;
}

/** An id derived from `id` that no call of the run holds (stable for one log). */
function freshId(used: ReadonlySet<string>, id: string): string {
  for (let n = 1; ; n++) {
    const digest = createHash("sha256").update(`${id}\u0000${n}`).digest("hex").slice(0, 16);
    const candidate = `reused_${digest}`;
    if (!used.has(candidate)) return candidate;
  }
}
