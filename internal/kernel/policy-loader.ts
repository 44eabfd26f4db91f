/**
 * Loads policy.yaml: YAML → zod (policy-schema.ts), reporting every problem at once with
 * the file, line, column and field at fault. Positions come from the YAML document's node
 * ranges, so an error points at the offending value (or, for an unknown key, at the key).
 */
import { readFileSync } from "node:fs";
import { dirname, resolve as resolvePath } from "node:path";
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

/**
 * Reads the policy a file `extends` (a path relative to the extending file). Answers the
 * text and its source name, or an error message.
 */
export type PolicyResolver = (
  from: string,
  ref: string,
) => { text: string; source: string } | { error: string };

/** How many files one `extends` chain may hold (a typo should not recurse forever). */
const MAX_LAYERS = 4;

/** One parsed file of a policy: its document, where its lines are, and its content. */
interface Layer {
  doc: Document;
  lines: LineCounter;
  source: string;
  input: Record<string, unknown>;
}

/**
 * Parses and validates policy text; `source` names the file in the issues. With `resolve`,
 * a top-level `extends: PATH` layers this file over another one: mappings merge key by key
 * (this file wins), lists and scalars are replaced whole. Every issue names the file and
 * line that holds the offending value.
 */
export function parsePolicy(
  text: string,
  source: string,
  resolve?: PolicyResolver,
): ParsePolicyResult {
  const layers = parseLayers(text, source, resolve, []);
  if (!Array.isArray(layers)) return layers;
  // A file that is not a mapping is validated as it is (the schema says what it expected).
  let merged: unknown = (layers[0] as Layer).input;
  for (const l of layers.slice(1)) merged = mergePolicy(merged as Record<string, unknown>, l.input);
  // 2. The schema: every zod issue, mapped back to the node of the layer that holds it.
  const parsed = PolicySchema.safeParse(merged);
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
        errors.push(issueAt(layers, path, true, `unknown ${what}${hint}`));
      }
      continue;
    }
    errors.push(issueAt(layers, issue.path, false, describe(issue, merged)));
  }
  errors.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.column - b.column);
  return { ok: false, errors };
}

/** The file's layers, base first, or the issues that stop it (syntax, empty, a bad extends). */
function parseLayers(
  text: string,
  source: string,
  resolve: PolicyResolver | undefined,
  seen: string[],
): Layer[] | { ok: false; errors: PolicyIssue[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset: number, field: string, message: string): PolicyIssue => {
    const { line, col } = lines.linePos(offset);
    return { file: source, line, column: col, field, message };
  };
  const fail = (errors: PolicyIssue[]) => ({ ok: false as const, errors });
  // 1. YAML syntax: every error the parser found (duplicate keys included). The document
  //    is not validated further: its content would be guesswork.
  if (doc.errors.length > 0) return fail(doc.errors.map((e) => at(e.pos[0], "(yaml)", e.message)));
  if (doc.contents === null)
    return fail([
      at(0, "(root)", "the policy is empty; expected a mapping that starts with `version: 1`"),
    ]);
  let input: unknown;
  try {
    input = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return fail([at(0, "(yaml)", (err as Error).message)]);
  }
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    if (seen.length > 0) return fail([at(0, "(root)", "an extended policy must be a mapping")]);
    return [{ doc, lines, source, input: input as Record<string, unknown> }];
  }
  const { extends: ref, ...own } = input as Record<string, unknown>;
  const layer: Layer = { doc, lines, source, input: own };
  if (ref === undefined) return [layer];
  const refAt = offsetOf(doc, ["extends"], false);
  if (typeof ref !== "string" || ref === "")
    return fail([at(refAt, "extends", `expected the path of a policy file, got ${show(ref)}`)]);
  if (resolve === undefined)
    return fail([at(refAt, "extends", "only a policy loaded from a file can extend another")]);
  if (seen.length + 1 >= MAX_LAYERS)
    return fail([at(refAt, "extends", `more than ${MAX_LAYERS} files extend each other`)]);
  const base = resolve(source, ref);
  if ("error" in base) return fail([at(refAt, "extends", base.error)]);
  if ([...seen, source].includes(base.source))
    return fail([at(refAt, "extends", `${base.source} extends itself (a cycle)`)]);
  const below = parseLayers(base.text, base.source, resolve, [...seen, source]);
  return Array.isArray(below) ? [...below, layer] : below;
}

/** `over` layered on `base`: mappings merge key by key, anything else is replaced. */
function mergePolicy(base: Record<string, unknown>, over: Record<string, unknown>) {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    const isMapping = (x: unknown): x is Record<string, unknown> =>
      x !== null && typeof x === "object" && !Array.isArray(x);
    out[k] = isMapping(b) && isMapping(v) ? mergePolicy(b, v) : v;
  }
  return out;
}

/** An issue at `path`, in the top-most layer that has it (else the extending file itself). */
function issueAt(layers: Layer[], path: Path, key: boolean, message: string): PolicyIssue {
  const top = layers.at(-1) as Layer;
  const holder =
    [...layers].reverse().find((l) => path.length > 0 && l.doc.hasIn(path as unknown[])) ?? top;
  const { line, col } = holder.lines.linePos(offsetOf(holder.doc, path, key));
  return { file: holder.source, line, column: col, field: fieldName(path), message };
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
  return parsePolicy(text, path, resolveRelative);
}

/** `extends` paths are relative to the file that names them. */
const resolveRelative: PolicyResolver = (from, ref) => {
  const path = resolvePath(dirname(from), ref);
  try {
    return { text: readFileSync(path, "utf8"), source: path };
  } catch (err) {
    return { error: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}` };
  }
};

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
