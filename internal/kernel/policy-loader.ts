/**
 * Loads policy.yaml: YAML → zod (policy-schema.ts), reporting every problem at once with
 * the file, line, column and field at fault. Positions come from the YAML document's node
 * ranges, so an error points at the offending value (or, for an unknown key, at the key).
 */
import { dirname, resolve as resolvePath } from "node:path";
import { readSmallFile } from "../config/read-small-file.ts";
import {
  formatIssues,
  issueAtOffset,
  issueAtPath,
  offsetOf,
  type Path,
  parseYamlFile,
  show,
  syntaxIssues,
  type YamlFile,
  type YamlIssue,
  zodIssues,
} from "../config/yaml-issues.ts";
import { AgentdError } from "../errors.ts";
import { type Policy, PolicySchema } from "./policy-schema.ts";

/** Field: a dotted path ("capabilities.repo.read.approval", "workspace.denyPatterns.2"), "(root)" or "(yaml)". */
export type PolicyIssue = YamlIssue;

export type ParsePolicyResult = { ok: true; policy: Policy } | { ok: false; errors: PolicyIssue[] };

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
interface Layer extends YamlFile {
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
  const errors: PolicyIssue[] = zodIssues(
    parsed.error.issues,
    merged,
    PolicySchema,
    (path, key, message) => issueAt(layers, path, key, message),
    (path) => (path.length === 1 && path[0] === "capabilities" ? "capability" : "key"),
    // A password pasted in where `$ENV.NAME` belongs is never repeated in a message.
    (path) => path[0] === "sandbox" && path[1] === "registryAuth" && path[3] === "password",
  );
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
  const file = parseYamlFile(text, source);
  const { doc, lines } = file;
  const at = (offset: number, field: string, message: string): PolicyIssue =>
    issueAtOffset(file, offset, field, message);
  const fail = (errors: PolicyIssue[]) => ({ ok: false as const, errors });
  // 1. YAML syntax: every error the parser found (duplicate keys included). The document
  //    is not validated further: its content would be guesswork.
  if (doc.errors.length > 0) return fail(syntaxIssues(file));
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
  return issueAtPath(holder, path, key, message);
}

/** Reads and parses a policy file; an unreadable file is one issue without a position. */
export function readPolicyFile(path: string): ParsePolicyResult {
  // Bounded: a path naming a directory, a device, a FIFO or a huge file is refused unread.
  const text = readSmallFile(path);
  if (typeof text !== "string") {
    const message = `cannot read the policy: ${text.error}`;
    return { ok: false, errors: [{ file: path, line: 0, column: 0, field: "(file)", message }] };
  }
  return parsePolicy(text, path, resolveRelative);
}

/** `extends` paths are relative to the file that names them. */
export const resolveRelative: PolicyResolver = (from, ref) => {
  const path = resolvePath(dirname(from), ref);
  const text = readSmallFile(path);
  return typeof text === "string"
    ? { text, source: path }
    : { error: `cannot read ${path}: ${text.error}` };
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
export const formatPolicyIssues = formatIssues;
