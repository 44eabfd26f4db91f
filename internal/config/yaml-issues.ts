/**
 * YAML configuration files checked against a zod schema, every problem reported at once
 * with the file, line, column and field at fault (policy.yaml, the export config).
 * Positions come from the YAML document's node ranges, so an error points at the offending
 * value (or, for an unknown key, at the key). Never echoes a value longer than a line.
 */
import { type Document, isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";

export type Path = readonly PropertyKey[];

export interface YamlIssue {
  file: string;
  /** 1-based; 0 when the file could not be read at all. */
  line: number;
  column: number;
  /** Dotted path ("sinks.0.url"), "(root)", "(yaml)" or "(file)". */
  field: string;
  message: string;
}

/** A parsed YAML file: its document and where its lines are, for issues that point into it. */
export interface YamlFile {
  doc: Document;
  lines: LineCounter;
  source: string;
}

export function parseYamlFile(text: string, source: string): YamlFile {
  const lines = new LineCounter();
  return { doc: parseDocument(text, { lineCounter: lines, prettyErrors: false }), lines, source };
}

/** An issue at a byte offset of the file. */
export function issueAtOffset(
  f: YamlFile,
  offset: number,
  field: string,
  message: string,
): YamlIssue {
  const { line, col } = f.lines.linePos(offset);
  return { file: f.source, line, column: col, field, message };
}

/** An issue at the node of `path` (its key when `key`, or when the value is not a scalar). */
export function issueAtPath(f: YamlFile, path: Path, key: boolean, message: string): YamlIssue {
  return issueAtOffset(f, offsetOf(f.doc, path, key), fieldName(path), message);
}

/** Every YAML syntax error the parser found (duplicate keys included), field "(yaml)". */
export function syntaxIssues(f: YamlFile): YamlIssue[] {
  return f.doc.errors.map((e) => issueAtOffset(f, e.pos[0], "(yaml)", e.message));
}

/** `FILE:LINE:COL: field: message`, one line per issue (`FILE: field: message` without a position). */
export function formatIssues(issues: readonly YamlIssue[]): string {
  return issues
    .map((i) => `${i.file}${i.line > 0 ? `:${i.line}:${i.column}` : ""}: ${i.field}: ${i.message}`)
    .join("\n");
}

/**
 * zod's issues as YamlIssues: `at` places one (a path, whether the key itself is at fault,
 * the message); an unknown key is one issue per key, at the key, naming the keys allowed.
 * `what` names an unknown key's kind at a path ("key" by default).
 */
export function zodIssues(
  issues: readonly z.core.$ZodIssue[],
  input: unknown,
  schema: unknown,
  at: (path: Path, key: boolean, message: string) => YamlIssue,
  what: (path: Path) => string = () => "key",
  /** Fields whose values are never repeated in a message (a secret pasted in by mistake). */
  secret: (path: Path) => boolean = () => false,
): YamlIssue[] {
  const errors: YamlIssue[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      const expected = objectKeysAt(schema, issue.path);
      for (const key of issue.keys) {
        const hint = expected.length > 0 ? `; expected one of ${expected.join(", ")}` : "";
        errors.push(at([...issue.path, key], true, `unknown ${what(issue.path)}${hint}`));
      }
      continue;
    }
    errors.push(at(issue.path, false, describe(issue, input, !secret(issue.path))));
  }
  return errors;
}

export function fieldName(path: Path): string {
  return path.length === 0 ? "(root)" : path.map(String).join(".");
}

/**
 * Offset of the node at `path`: the value when it is a non-empty scalar (so the column
 * points at it), otherwise the key (for a mapping, a list, an empty value, or `key`
 * asked for: an unknown key). A path that does not exist (a missing required field)
 * falls back to its nearest existing parent's key.
 */
export function offsetOf(doc: Document, path: Path, key: boolean): number {
  for (let n = path.length; n > 0; n--) {
    const parent = n === 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true);
    const seg = path[n - 1];
    if (isMap(parent)) {
      const pair = parent.items.find((p) => isScalar(p.key) && String(p.key.value) === String(seg));
      if (pair === undefined) continue;
      const v = pair.value;
      const useValue =
        !key && n === path.length && isScalar(v) && v.range && v.range[1] > v.range[0];
      const node = useValue ? v : pair.key;
      if (isScalar(node) && node.range) return node.range[0];
    } else if (isSeq(parent)) {
      const item = parent.items[Number(seg)] as { range?: [number, number, number] } | undefined;
      if (item?.range) return item.range[0];
    }
  }
  return doc.contents?.range?.[0] ?? 0;
}

/** A zod issue in words that name what was expected (and, where useful, what was found). */
export function describe(issue: z.core.$ZodIssue, input: unknown, echo = true): string {
  const value = valueAt(input, issue.path);
  const got = value === undefined || !echo ? "" : `, got ${show(value)}`;
  switch (issue.code) {
    case "invalid_type": {
      const expected = TYPE_WORDS[issue.expected] ?? `a ${issue.expected}`;
      return value === undefined ? `missing; expected ${expected}` : `expected ${expected}${got}`;
    }
    case "invalid_value": {
      const vs = issue.values.map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
      const expected = vs.length === 1 ? vs[0] : `one of ${vs.join(", ")}`;
      return value === undefined ? `missing; expected ${expected}` : `expected ${expected}${got}`;
    }
    case "too_small":
    case "too_big":
    case "invalid_format":
      // zod's wording minus its prefix: "expected number to be >=16".
      return `${issue.message.replace(/^[A-Z][a-z]+ [a-z]+: /, "")}${got}`;
    case "invalid_union": {
      // A discriminated union (secrets.providers[].type) names its options.
      const options = (issue as { options?: unknown[] }).options;
      return options ? `expected one of ${options.join(", ")}${got}` : issue.message;
    }
    default:
      return issue.message;
  }
}

const TYPE_WORDS: Record<string, string> = {
  object: "a mapping",
  array: "a list",
  number: "a number",
  string: "a string",
  boolean: "true or false",
};

export function show(v: unknown): string {
  if (v === null) return "nothing (null)";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "a mapping";
  return JSON.stringify(v);
}

function valueAt(input: unknown, path: Path): unknown {
  let v = input;
  for (const seg of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg];
  }
  return v;
}

/** Keys the schema allows at `path` (an object schema), for "expected one of" hints. */
export function objectKeysAt(schema: unknown, path: Path): string[] {
  type Node = {
    def: {
      type: string;
      innerType?: Node;
      in?: Node;
      element?: Node;
      shape?: Record<string, Node>;
    };
  };
  const unwrap = (n: Node | undefined): Node | undefined => {
    let s = n;
    while (
      s &&
      ["default", "prefault", "optional", "nullable", "pipe", "readonly"].includes(s.def.type)
    ) {
      s = s.def.innerType ?? s.def.in;
    }
    return s;
  };
  let s = unwrap(schema as Node);
  for (const seg of path) {
    s = unwrap(typeof seg === "number" ? s?.def.element : s?.def.shape?.[String(seg)]);
  }
  return s?.def.type === "object" ? Object.keys(s.def.shape ?? {}) : [];
}
