/**
 * Loads policy.yaml: YAML → zod (policy-schema.ts), reporting every problem at once with
 * the file, line, column and field at fault. Positions come from the YAML document's node
 * ranges, so an error points at the offending value (or, for an unknown key, at the key).
 */
import { readFileSync } from "node:fs";
import { type Document, isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { AgentdError } from "../errors.ts";
import { type Policy, PolicySchema } from "./policy-schema.ts";

export interface PolicyIssue {
  file: string;
  /** 1-based; 0 when the file could not be read at all. */
  line: number;
  column: number;
  /** Dotted path ("capabilities.repo.read.approval", "workspace.denyPatterns.2"), "(root)" or "(yaml)". */
  field: string;
  message: string;
}

export type ParsePolicyResult = { ok: true; policy: Policy } | { ok: false; errors: PolicyIssue[] };

type Path = readonly PropertyKey[];

/** Parses and validates policy text; `source` names the file in the issues. */
export function parsePolicy(text: string, source: string): ParsePolicyResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset: number, field: string, message: string): PolicyIssue => {
    const { line, col } = lines.linePos(offset);
    return { file: source, line, column: col, field, message };
  };

  // 1. YAML syntax: every error the parser found (duplicate keys included). The document
  //    is not validated further: its content would be guesswork.
  if (doc.errors.length > 0) {
    return { ok: false, errors: doc.errors.map((e) => at(e.pos[0], "(yaml)", e.message)) };
  }
  if (doc.contents === null) {
    return {
      ok: false,
      errors: [
        at(0, "(root)", "the policy is empty; expected a mapping that starts with `version: 1`"),
      ],
    };
  }
  let input: unknown;
  try {
    input = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return { ok: false, errors: [at(0, "(yaml)", (err as Error).message)] };
  }

  // 2. The schema: every zod issue, mapped back to its node.
  const parsed = PolicySchema.safeParse(input);
  if (parsed.success) return { ok: true, policy: parsed.data };
  const errors: PolicyIssue[] = [];
  for (const issue of parsed.error.issues) {
    if (issue.code === "unrecognized_keys") {
      // Reported once on the parent with all the keys: one issue per key, at the key.
      const expected = objectKeysAt(issue.path);
      const what =
        issue.path.length === 1 && issue.path[0] === "capabilities" ? "capability" : "key";
      for (const key of issue.keys) {
        const path = [...issue.path, key];
        const hint = expected.length > 0 ? `; expected one of ${expected.join(", ")}` : "";
        errors.push(at(offsetOf(doc, path, true), fieldName(path), `unknown ${what}${hint}`));
      }
      continue;
    }
    errors.push(
      at(offsetOf(doc, issue.path, false), fieldName(issue.path), describe(issue, input)),
    );
  }
  errors.sort((a, b) => a.line - b.line || a.column - b.column);
  return { ok: false, errors };
}

/** Reads and parses a policy file; an unreadable file is one issue without a position. */
export function readPolicyFile(path: string): ParsePolicyResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const message = `cannot read the policy: ${(err as Error).message}`;
    return { ok: false, errors: [{ file: path, line: 0, column: 0, field: "(file)", message }] };
  }
  return parsePolicy(text, path);
}

/** Loads a policy file or throws EVALIDATION listing every issue, one per line. */
export function loadPolicyFile(path: string): Policy {
  const r = readPolicyFile(path);
  if (r.ok) return r.policy;
  const n = r.errors.length;
  throw new AgentdError(
    "EVALIDATION",
    `invalid policy ${path} (${n} ${n === 1 ? "issue" : "issues"}):\n${formatPolicyIssues(r.errors)}`,
    { field: r.errors[0]?.field },
  );
}

/** `FILE:LINE:COL: field: message`, one line per issue (`FILE: field: message` without a position). */
export function formatPolicyIssues(issues: readonly PolicyIssue[]): string {
  return issues
    .map((i) => `${i.file}${i.line > 0 ? `:${i.line}:${i.column}` : ""}: ${i.field}: ${i.message}`)
    .join("\n");
}

function fieldName(path: Path): string {
  return path.length === 0 ? "(root)" : path.map(String).join(".");
}

/**
 * Offset of the node at `path`: the value when it is a non-empty scalar (so the column
 * points at it), otherwise the key (for a mapping, a list, an empty value, or `key`
 * asked for: an unknown key). A path that does not exist (a missing required field)
 * falls back to its nearest existing parent's key.
 */
function offsetOf(doc: Document, path: Path, key: boolean): number {
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
function describe(issue: z.core.$ZodIssue, input: unknown): string {
  const value = valueAt(input, issue.path);
  const got = value === undefined ? "" : `, got ${show(value)}`;
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

function show(v: unknown): string {
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
function objectKeysAt(path: Path): string[] {
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
  let s = unwrap(PolicySchema as unknown as Node);
  for (const seg of path) {
    s = unwrap(typeof seg === "number" ? s?.def.element : s?.def.shape?.[String(seg)]);
  }
  return s?.def.type === "object" ? Object.keys(s.def.shape ?? {}) : [];
}
