/**
 * A server message (a run, an event, an approval, a preview) with every string in it (nested
 * messages, lists and map keys included) escaped for the terminal (terminal-safe.ts
 * escapeText), for the human renderings: the renderer, `events`, `get`, `runs`,
 * `approvals`. Escaping the message where it enters a rendering keeps every field safe
 * however it is laid out later: the fields are escaped before agentctl styles them (and
 * terminal-out.ts escapes the whole text once more before it turns agentctl's own color
 * marks into colors).
 *
 * Must never: be used for -o/--json output (those print values intact, escaped in their
 * own syntax), change anything but strings, or throw on a message it was given (it walks
 * the message by reflection; no JSON round trip that an odd timestamp could fail).
 */
import { clone, type DescMessage, type MessageShape, ScalarType } from "@bufbuild/protobuf";
import {
  type ReflectList,
  type ReflectMap,
  type ReflectMessage,
  reflect,
} from "@bufbuild/protobuf/reflect";
import { escapeText } from "./terminal-safe.ts";

function walkList(f: ReflectMessage["fields"][number], l: ReflectList): void {
  if (f.fieldKind !== "list") return;
  if (f.listKind === "message") for (const m of l) walk(m as ReflectMessage);
  else if (f.listKind === "scalar" && f.scalar === ScalarType.STRING)
    for (let i = 0; i < l.size; i++) l.set(i, escapeText(l.get(i) as string));
}

function walkMap(f: ReflectMessage["fields"][number], m: ReflectMap): void {
  if (f.fieldKind !== "map") return;
  const entries = [...m.entries()];
  m.clear();
  for (const [k, v] of entries) {
    const key = f.mapKey === ScalarType.STRING ? escapeText(k as string) : k;
    if (f.mapKind === "message") walk(v as ReflectMessage);
    const value =
      f.mapKind === "scalar" && f.scalar === ScalarType.STRING ? escapeText(v as string) : v;
    m.set(key, value);
  }
}

function walk(r: ReflectMessage): void {
  for (const f of r.fields) {
    if (!r.isSet(f)) continue;
    switch (f.fieldKind) {
      case "scalar":
        if (f.scalar === ScalarType.STRING) r.set(f, escapeText(r.get(f) as string));
        break;
      case "message":
        walk(r.get(f) as ReflectMessage);
        break;
      case "list":
        walkList(f, r.get(f) as ReflectList);
        break;
      case "map":
        walkMap(f, r.get(f) as ReflectMap);
        break;
      default:
        break;
    }
  }
}

/** `msg` with every string escaped (a copy; `msg` is left as it is). */
export function escapeMessage<D extends DescMessage>(
  schema: D,
  msg: MessageShape<D>,
): MessageShape<D> {
  const copy = clone(schema, msg);
  walk(reflect(schema, copy));
  return copy;
}
