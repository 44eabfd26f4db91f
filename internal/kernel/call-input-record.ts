/**
 * The tool.call's record of a call's input: the input as proposed (placeholders stay),
 * redacted, measured to fit one event. An input too large for the event is recorded with
 * its strings cut head+tail, and one that cannot be encoded (nested too deep) as a note:
 * either way the kernel refuses the call (EVALIDATION, field "input"), because a resumed
 * run rebuilds the call from this record.
 *
 * Never throws: whatever the input, there is a record and a verdict.
 */
import { create } from "@bufbuild/protobuf";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { ToolCallSchema } from "../gen/agentd/v1/events_pb.js";
import { EVENT_BUDGET, type EventPlace, fitDocument, sealedBytes } from "./event-fit.ts";
import { clipText } from "./head-tail.ts";

export interface InputRecord {
  /** What tool.call's input_json holds. */
  inputJson: string;
  /** Set when the call must be refused because its input could not be recorded as it is. */
  refusal?: { rule: string; reason: string };
}

/** Records `input` of the call `callId` to `tool` (already clipped) at `place`. */
export function recordCallInput(
  place: EventPlace,
  callId: string,
  tool: string,
  input: unknown,
  redact: (value: unknown) => unknown,
): InputRecord {
  try {
    // Redacted string by string, then encoded: a rule can never break the JSON.
    const text = canonicalJson(redact(input ?? null));
    const event = (json: string): EventPayload => ({
      case: "toolCall",
      value: create(ToolCallSchema, { callId, tool, inputJson: json }),
    });
    if (sealedBytes(place, event(text)) <= EVENT_BUDGET) return { inputJson: text };
    const fitted = fitDocument(parseOr(text), {
      place,
      maxJson: EVENT_BUDGET,
      note: (n, unit) => `[agentd: ${n} ${unit} left out of the recorded input]`,
      build: (_shaped, json) => event(json),
    });
    return {
      inputJson: fitted.json,
      refusal: {
        rule: "input.size",
        reason: `${tool}: input: ${Buffer.byteLength(text)} bytes of JSON, too large to record in one event (limit ${EVENT_BUDGET} bytes once encoded); make the call smaller (a shorter patch, a line range)`,
      },
    };
  } catch (err) {
    // canonicalJson recurses: an input nested tens of thousands deep overflows the stack.
    const why = clipText(err instanceof Error ? `${err.name}: ${err.message}` : "unknown", 512);
    return {
      inputJson: JSON.stringify(`[agentd: the input could not be encoded: ${why}]`),
      refusal: {
        rule: "input.schema",
        reason: `${tool}: input: could not be encoded as JSON (${why})`,
      },
    };
  }
}

/** The value of JSON `text`, or the text itself when it is not JSON (a redaction broke it). */
function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
