/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, arrays in order.
 * The hash chain is computed over this form, so it must never change for a stored event.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const s = JSON.stringify(value);
    if (s === undefined) throw new TypeError(`canonicalJson: cannot encode ${typeof value}`);
    return s;
  }
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      out += `${i > 0 ? "," : ""}${canonicalJson(v === undefined ? null : v)}`;
    }
    return `${out}]`;
  }
  const obj = value as Record<string, unknown>;
  let out = "";
  for (const k of Object.keys(obj).sort()) {
    const v = obj[k];
    if (v === undefined) continue;
    out += `${out === "" ? "" : ","}${JSON.stringify(k)}:${canonicalJson(v)}`;
  }
  return `{${out}}`;
}
