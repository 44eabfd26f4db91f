/**
 * Evaluates a parsed path against a JSON value (the protobuf-JSON form of a resource):
 * each step maps every value selected so far to the values it selects. Missing fields,
 * indices out of range and steps that do not fit the value (a field of an array) select
 * nothing, as with kubectl's `--allow-missing-template-keys` (its default): a template
 * that matches nothing prints nothing. Pure: it never changes the data.
 */
import type { Comparison, Filter, Operand, Path, Step } from "./syntax.ts";

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The values `path` selects; `root` is the document (`$`), `current` is `@`. */
export function evaluatePath(path: Path, root: unknown, current: unknown): unknown[] {
  let values = [path.from === "$" ? root : current];
  for (const step of path.steps) values = values.flatMap((v) => apply(step, v, root));
  return values;
}

function apply(step: Step, v: unknown, root: unknown): unknown[] {
  switch (step.t) {
    case "field":
      return isObject(v) ? step.names.filter((n) => Object.hasOwn(v, n)).map((n) => v[n]) : [];
    case "wildcard":
      return children(v);
    case "index":
      if (!Array.isArray(v)) return [];
      return step.indices
        .map((i) => (i < 0 ? v.length + i : i))
        .filter((i) => i >= 0 && i < v.length)
        .map((i) => v[i]);
    case "slice":
      return Array.isArray(v) ? slice(v, step) : [];
    case "filter":
      return children(v).filter((el) => keeps(step.filter, el, root));
    case "descend":
      return [v, ...descendants(v)];
  }
}

/** The elements of an array or the member values of an object. */
function children(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  return isObject(v) ? Object.values(v) : [];
}

function descendants(v: unknown): unknown[] {
  return children(v).flatMap((c) => [c, ...descendants(c)]);
}

/** Python's a[start:end:step]. */
function slice(a: unknown[], s: Extract<Step, { t: "slice" }>): unknown[] {
  const n = a.length;
  const step = s.step ?? 1;
  const norm = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x < 0 ? x + n : x));
  const out: unknown[] = [];
  if (step > 0) {
    const end = s.end === undefined ? n : norm(s.end, 0, n);
    for (let i = s.start === undefined ? 0 : norm(s.start, 0, n); i < end; i += step)
      out.push(a[i]);
  } else {
    const end = s.end === undefined ? -1 : norm(s.end, -1, n - 1);
    for (let i = s.start === undefined ? n - 1 : norm(s.start, -1, n - 1); i > end; i += step)
      out.push(a[i]);
  }
  return out;
}

/** The operand's value (a path's first match), or undefined when a path matches nothing. */
function operand(o: Operand, el: unknown, root: unknown): { value: unknown } | undefined {
  if (o.t === "literal") return { value: o.value };
  const found = evaluatePath(o.path, root, el);
  return found.length === 0 ? undefined : { value: found[0] };
}

/**
 * Protobuf JSON writes 64-bit integers as strings ("eventCount": "12"), so a string of
 * digits compares as the number it is.
 */
function asNumber(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  return typeof v === "string" && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : undefined;
}

function keeps(f: Filter, el: unknown, root: unknown): boolean {
  const l = operand(f.left, el, root);
  if (f.op === undefined || f.right === undefined) return l !== undefined;
  const r = operand(f.right, el, root);
  if (l === undefined || r === undefined) return false;
  return compare(l.value, f.op, r.value);
}

function compare(a: unknown, op: Comparison, b: unknown): boolean {
  const na = asNumber(a);
  const nb = asNumber(b);
  let order: number | undefined;
  if (na !== undefined && nb !== undefined) order = na - nb;
  else if (typeof a === "string" && typeof b === "string") order = a < b ? -1 : a > b ? 1 : 0;
  if (order === undefined) {
    const same = JSON.stringify(a) === JSON.stringify(b);
    return op === "==" ? same : op === "!=" ? !same : false;
  }
  switch (op) {
    case "==":
      return order === 0;
    case "!=":
      return order !== 0;
    case "<":
      return order < 0;
    case "<=":
      return order <= 0;
    case ">":
      return order > 0;
    case ">=":
      return order >= 0;
  }
}
