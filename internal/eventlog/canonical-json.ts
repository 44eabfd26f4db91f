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

/**
 * Sealing in one pass: `derive` receives the canonical JSON of `obj` without its `key`
 * member, and its answer becomes the string member `key`. Returns that value and the
 * canonical JSON of the object including it — byte for byte what canonicalJson would give
 * for `{...obj, [key]: value}`, but each nested value is encoded only once.
 */
export function canonicalJsonWith(
  obj: Record<string, unknown>,
  key: string,
  derive: (canonicalWithout: string) => string,
): { value: string; json: string } {
  const keys = Object.keys(obj)
    .filter((k) => k !== key && obj[k] !== undefined)
    .sort();
  const members = keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`);
  const value = derive(`{${members.join(",")}}`);
  let at = 0;
  while (at < keys.length && (keys[at] as string) < key) at++;
  members.splice(at, 0, `${JSON.stringify(key)}:${JSON.stringify(value)}`);
  return { value, json: `{${members.join(",")}}` };
}
