/**
 * The syntax tree of a kubectl-style JSONPath template (`-o jsonpath=…`) and its error.
 * Types only, plus the error every parser in this folder throws: it carries the 1-based
 * character position in the template, so a message can point at the mistake.
 */

/** A step of a path, applied to each value the previous step selected. */
export type Step =
  /** `.name`, `['name']`, `['a','b']`: members of an object. */
  | { t: "field"; names: string[] }
  /** `.*`, `[*]`: every element of an array, every member value of an object. */
  | { t: "wildcard" }
  /** `[0]`, `[-1]`, `[0,2]`: elements by position (negative: from the end). */
  | { t: "index"; indices: number[] }
  /** `[start:end:step]`, Python's slice. */
  | { t: "slice"; start: number | undefined; end: number | undefined; step: number | undefined }
  /** `[?(@.state=="RUN_STATE_FAILED")]`: elements (or member values) the filter keeps. */
  | { t: "filter"; filter: Filter }
  /** `..`: the value and everything below it, in document order. */
  | { t: "descend" };

/** A path: from the document root (`$`) or the current value (`@`, `.`). */
export interface Path {
  from: "$" | "@";
  steps: Step[];
}

export type Operand = { t: "path"; path: Path } | { t: "literal"; value: unknown };

export type Comparison = "==" | "!=" | "<" | "<=" | ">" | ">=";

/** `?(@.x)`: @.x exists; `?(@.x OP operand)`: compares. */
export interface Filter {
  left: Operand;
  op?: Comparison;
  right?: Operand;
}

/** A template: literal text, paths to print, and `{range PATH}…{end}` loops. */
export type TemplateNode =
  | { t: "text"; text: string }
  | { t: "path"; path: Path }
  | { t: "range"; path: Path; body: TemplateNode[] };

/** A malformed template: `position` is the 1-based character it is about. */
export class JsonPathError extends Error {
  override name = "JsonPathError";
  readonly position: number;
  readonly problem: string;
  constructor(problem: string, position: number) {
    super(`${problem} at character ${position}`);
    this.problem = problem;
    this.position = position;
  }
}
