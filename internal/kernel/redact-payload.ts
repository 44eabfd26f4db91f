/**
 * Redaction of a whole event payload (or any protobuf-es message): every string field,
 * in nested messages, repeated fields, maps and oneofs, goes through the redactor before
 * the event is sealed. This is the run-wide guard of invariant 9: whatever the driver or
 * the kernel appends for a run passes here, so a secret value cannot reach the log by a
 * path nobody thought of. Must never: change anything but string values (ids, digests and
 * numbers are strings or numbers a secret cannot be mistaken for; they pass unchanged when
 * no secret form is in them), or mutate its input.
 */
import type { Redactor } from "./redaction.ts";

/** Deep copy of `v` with every string redacted; `$typeName` and a oneof's `case` kept. */
export function redactMessage<T>(v: T, redactor: Redactor): T {
  return walk(v, redactor, 0) as T;
}

function walk(v: unknown, r: Redactor, depth: number): unknown {
  if (typeof v === "string") return v === "" ? v : r.text(v);
  if (v === null || typeof v !== "object") return v;
  if (ArrayBuffer.isView(v)) return v; // bytes fields: redact text before encoding it
  if (depth > 64) return v; // protobuf messages of agentd are a few levels deep
  if (Array.isArray(v)) {
    let changed = false;
    const out = v.map((x) => {
      const y = walk(x, r, depth + 1);
      if (y !== x) changed = true;
      return y;
    });
    return changed ? out : v;
  }
  const src = v as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const k of Object.keys(src)) {
    if (k === "$typeName" || k === "$unknown") continue;
    if (k === "case" && "value" in src) continue;
    const before = src[k];
    const after = walk(before, r, depth + 1);
    if (after !== before) {
      out ??= Object.assign(Object.create(Object.getPrototypeOf(src)), src);
      (out as Record<string, unknown>)[k] = after;
    }
  }
  return out ?? v;
}
