/**
 * Parses one JSONPath expression of a kubectl-style template (`.items[*].runId`,
 * `$.labels['team']`, `..name`, `[?(@.state=="RUN_STATE_FAILED")]`, `[-1]`, `[0:2]`) into
 * steps. It reads as far as a path goes and leaves the rest to its caller; every mistake
 * names its character position. It never evaluates anything.
 */
import type { Cursor } from "./cursor.ts";
import type { Comparison, Filter, Operand, Path, Step } from "./syntax.ts";

const NAME_CHAR = /[\p{L}\p{N}_-]/u;
const COMPARISONS: Comparison[] = ["==", "!=", "<=", ">=", "<", ">"];

/** True when a path starts at the cursor (`.`, `[`, `$` or `@`). */
export function startsPath(c: Cursor): boolean {
  const ch = c.peek();
  return ch === "." || ch === "[" || ch === "$" || ch === "@";
}

export function parsePath(c: Cursor): Path {
  let from: Path["from"] = "@";
  if (c.eat("$")) from = "$";
  else c.eat("@");
  const steps: Step[] = [];
  for (;;) {
    if (c.eat("..")) {
      steps.push({ t: "descend" });
      if (c.peek() !== "[") steps.push(readMember(c, '".."'));
    } else if (c.eat(".")) {
      steps.push(readMember(c, '"."'));
    } else if (c.peek() === "[") {
      steps.push(readSubscript(c));
    } else {
      return { from, steps };
    }
  }
}

/** A field name or `*` after "." or "..". */
function readMember(c: Cursor, after: string): Step {
  if (c.eat("*")) return { t: "wildcard" };
  const start = c.i;
  while (c.peek() !== undefined && NAME_CHAR.test(c.peek() as string)) c.i++;
  if (c.i === start) c.fail(`expected a field name or * after ${after}, found ${c.here()}`);
  return { t: "field", names: [c.src.slice(start, c.i)] };
}

/** `[*]`, `[?(…)]`, `['a','b']`, `[1]`, `[0,2]`, `[1:3]`, `[::-1]`. */
function readSubscript(c: Cursor): Step {
  const open = c.i;
  c.i++;
  c.skipSpaces();
  let step: Step;
  if (c.eat("*")) {
    step = { t: "wildcard" };
  } else if (c.eat("?")) {
    c.expect("(", 'after "[?"');
    const filter = readFilter(c);
    c.expect(")", "to close the filter");
    step = { t: "filter", filter };
  } else if (c.peek() === '"' || c.peek() === "'") {
    step = { t: "field", names: readList(c, () => c.readQuoted()) };
  } else if (/[-\d:]/.test(c.peek() ?? "")) {
    step = readNumbers(c);
  } else {
    c.fail(`expected *, ?(…), a quoted name or a number after "[", found ${c.here()}`);
  }
  c.skipSpaces();
  if (!c.eat("]"))
    c.fail(`expected "]" to close the "[" at character ${open + 1}, found ${c.here()}`);
  return step;
}

/** One or more items separated by commas. */
function readList<T>(c: Cursor, item: () => T): T[] {
  const out = [item()];
  c.skipSpaces();
  while (c.eat(",")) {
    c.skipSpaces();
    out.push(item());
    c.skipSpaces();
  }
  return out;
}

function readInt(c: Cursor): number | undefined {
  const m = /^-?\d+/.exec(c.src.slice(c.i, c.end));
  if (m === null) return undefined;
  c.i += m[0].length;
  return Number(m[0]);
}

/** `[1]`, `[0,2]` (a union of indices) or `[start:end:step]`. */
function readNumbers(c: Cursor): Step {
  const at = c.i;
  const first = readInt(c);
  if (c.peek() !== ":") {
    if (first === undefined) c.fail(`expected a number, found ${c.here()}`);
    const rest: number[] = [];
    c.skipSpaces();
    while (c.eat(",")) {
      c.skipSpaces();
      const n = readInt(c);
      if (n === undefined) c.fail(`expected a number after ",", found ${c.here()}`);
      rest.push(n);
      c.skipSpaces();
    }
    return { t: "index", indices: [first, ...rest] };
  }
  c.i++;
  const end = readInt(c);
  const step = c.eat(":") ? readInt(c) : undefined;
  if (step === 0) c.fail("a slice's step cannot be 0", at);
  return { t: "slice", start: first, end, step };
}

/** `@.x` (it exists) or `@.x OP operand`. */
function readFilter(c: Cursor): Filter {
  c.skipSpaces();
  const at = c.i;
  const left = readOperand(c);
  c.skipSpaces();
  if (c.peek() === ")") {
    if (left.t !== "path") c.fail("a filter without a comparison needs a path (?(@.field))", at);
    return { left };
  }
  const op = COMPARISONS.find((o) => c.eat(o));
  if (op === undefined)
    c.fail(`expected ==, !=, <, <=, >, >= or ")" in the filter, found ${c.here()}`);
  c.skipSpaces();
  const right = readOperand(c);
  c.skipSpaces();
  return { left, op, right };
}

function readOperand(c: Cursor): Operand {
  if (startsPath(c)) return { t: "path", path: parsePath(c) };
  if (c.peek() === '"' || c.peek() === "'") return { t: "literal", value: c.readQuoted() };
  const num = /^-?\d+(\.\d+)?/.exec(c.src.slice(c.i, c.end));
  if (num !== null) {
    c.i += num[0].length;
    return { t: "literal", value: Number(num[0]) };
  }
  for (const [word, value] of [
    ["true", true],
    ["false", false],
    ["null", null],
  ] as const) {
    if (c.eat(word)) return { t: "literal", value };
  }
  c.fail(
    `expected a path (@.field), a quoted string, a number, true, false or null, found ${c.here()}`,
  );
}
