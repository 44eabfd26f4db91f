/**
 * A server message (a run, an event, an approval, a preview) with every string in it (map
 * keys included) escaped for the terminal (terminal-safe.ts escapeText), for the human
 * renderings: the renderer, `events`, `get`, `runs`, `approvals`. Escaping the message where
 * it enters a rendering keeps every field safe however it is laid out later, agentctl's own
 * colors included (terminal-out.ts lets those exact sequences through, so a field must
 * never reach it holding one).
 *
 * Must never: be used for -o/--json output (those print values intact, escaped in their
 * own syntax), or change anything but strings.
 */
import { type DescMessage, fromJson, type MessageShape, toJson } from "@bufbuild/protobuf";
import { escapeText } from "./terminal-safe.ts";

function escapeDeep(v: unknown): unknown {
  if (typeof v === "string") return escapeText(v);
  if (Array.isArray(v)) return v.map(escapeDeep);
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[escapeText(k)] = escapeDeep(x);
    return out;
  }
  return v;
}

/** `msg` with every string escaped (a copy; `msg` is left as it is). */
export function escapeMessage<D extends DescMessage>(
  schema: D,
  msg: MessageShape<D>,
): MessageShape<D> {
  // Through protobuf JSON: strings stay strings (bytes are base64, ASCII: unchanged).
  return fromJson(schema, escapeDeep(toJson(schema, msg)) as never) as MessageShape<D>;
}
