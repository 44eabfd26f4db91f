/**
 * Run labels, validated as Kubernetes validates them, and label selectors as kubectl
 * writes them: `k=v` (or `k==v`), `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`,
 * joined by commas (all must match).
 *
 * Must never: accept a key or value Kubernetes would refuse (labels are copied into
 * metrics, logs and other systems' labels), or match a run on a selector it could not
 * parse (a bad selector is INVALID_ARGUMENT naming the term, never "match everything").
 */
import { createHash } from "node:crypto";
import { invalid } from "../errors.ts";

export const MAX_LABELS = 32;
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `key` is not a Kubernetes label key, or undefined when it is one. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf("/");
  const [prefix, name] = slash < 0 ? [undefined, key] : [key.slice(0, slash), key.slice(slash + 1)];
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    return "key prefix must be a DNS subdomain (lowercase a-z, 0-9, '-' and '.', at most 253 characters) before one '/'";
  if (!NAME.test(name))
    return "key name must be 1-63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit";
  return undefined;
}

/** Why `value` is not a Kubernetes label value, or undefined when it is one. */
export function labelValueProblem(value: string): string | undefined {
  if (value === "" || NAME.test(value)) return undefined;
  return "value must be empty or 1-63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit";
}

/** Throws INVALID_ARGUMENT naming the first bad label (`labels["k"]`). */
export function validateLabels(labels: Record<string, string>, field = "labels"): void {
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) throw invalid(field, `at most ${MAX_LABELS} labels`);
  for (const [k, v] of entries) {
    const name = `${field}[${JSON.stringify(k.slice(0, 300))}]`;
    const problem = labelKeyProblem(k) ?? labelValueProblem(v);
    if (problem !== undefined) throw invalid(name, problem);
  }
}

export type Requirement =
  | { key: string; op: "exists" | "!exists" }
  | { key: string; op: "in" | "notin"; values: readonly string[] };

/** Longest selector accepted (a URL query or a flag, not a program). */
const MAX_SELECTOR = 4096;

/** Parses a selector; throws INVALID_ARGUMENT naming `field` and the bad term. */
export function parseSelector(selector: string, field = "label_selector"): Requirement[] {
  if (selector.length > MAX_SELECTOR)
    throw invalid(field, `is longer than ${MAX_SELECTOR} characters`);
  const out: Requirement[] = [];
  for (const term of splitTerms(selector, field)) out.push(parseTerm(term, field));
  return out;
}

/** Commas outside parentheses separate terms. */
function splitTerms(selector: string, field: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    if (depth < 0 || depth > 1) throw invalid(field, "unbalanced parentheses");
    if (i === selector.length || (c === "," && depth === 0)) {
      terms.push(selector.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (depth !== 0) throw invalid(field, "unbalanced parentheses");
  if (terms.length === 1 && terms[0] === "") return [];
  const empty = terms.indexOf("");
  if (empty >= 0) throw invalid(field, `term ${empty + 1} is empty`);
  return terms;
}

function parseTerm(term: string, field: string): Requirement {
  const bad = (why: string) => invalid(field, `${JSON.stringify(term)}: ${why}`);
  const key = (k: string): string => {
    const problem = labelKeyProblem(k.trim());
    if (problem !== undefined) throw bad(problem);
    return k.trim();
  };
  const value = (v: string): string => {
    const problem = labelValueProblem(v.trim());
    if (problem !== undefined) throw bad(problem);
    return v.trim();
  };
  const set = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(term);
  if (set !== null) {
    const values = (set[3] as string).split(",").map(value);
    return { key: key(set[1] as string), op: set[2] as "in" | "notin", values };
  }
  const eq = /^([^!=]+?)\s*(==|=|!=)\s*([^=]*)$/.exec(term);
  if (eq !== null) {
    const op = eq[2] === "!=" ? "notin" : "in";
    return { key: key(eq[1] as string), op, values: [value(eq[3] as string)] };
  }
  if (term.startsWith("!")) return { key: key(term.slice(1)), op: "!exists" };
  if (/[=!()\s]/.test(term)) throw bad("expected k=v, k!=v, k, !k, k in (…) or k notin (…)");
  return { key: key(term), op: "exists" };
}

/** True when `labels` meet every requirement (Kubernetes' semantics: `!=` and `notin` match a missing key). */
export function matchesSelector(
  labels: Readonly<Record<string, string>>,
  requirements: readonly Requirement[],
): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    if (!("values" in r)) return has === (r.op === "exists");
    const hit = has && r.values.includes(labels[r.key] as string);
    return r.op === "in" ? hit : !hit;
  });
}

/**
 * Any text as a valid label value: characters outside [A-Za-z0-9-_.] become '-', the ends
 * are trimmed to a letter or digit, and text longer than 63 keeps its first 54 characters
 * and 8 hex digits of its sha256 (so two long texts stay apart). For derived labels
 * (agentctl's `repo`: a remote URL).
 */
export function toLabelValue(text: string): string {
  const trim = (s: string) => s.replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
  const clean = trim(text.replace(/[^A-Za-z0-9._-]+/g, "-"));
  if (clean.length <= 63) return clean;
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 8);
  return `${trim(clean.slice(0, 54))}-${digest}`;
}
