/**
 * How two policies differ, rule by rule, in words a platform engineer reads: capability
 * approvals (effective: a capability left out falls back to its default), deny and
 * high-risk commands, secret/config/build paths, network hosts, trust rules, limits. Works
 * on loaded policies (`extends` resolved, defaults applied, sizes in bytes), so it reports
 * exactly what the digests see: no differences ⇔ same digest.
 *
 * Must never: report a difference the kernel cannot see (formatting, key order, "1MiB"
 * against 1048576), or miss one the digest sees (every field falls through to the generic
 * comparison). Values are returned raw; the caller escapes them for a terminal.
 */
import { canonicalJson } from "../eventlog/canonical-json.ts";
import { CAPABILITY_NAMES, type Policy } from "./policy-schema.ts";

/** One difference: the field it is in (dotted) and what changed, in words. */
export interface PolicyDifference {
  field: string;
  text: string;
}

/** What one list's entries are called. */
const LIST_NOUNS: Record<string, string> = {
  "workspace.denyPatterns": "denied workspace path",
  "risk.highRiskCommands": "high-risk command (needs approval)",
  "risk.denyCommands": "deny command",
  "risk.denyCommandPatterns": "deny command pattern",
  "risk.secretPaths": "secret path",
  "risk.configPaths": "config path",
  "risk.buildPaths": "build path",
  "redaction.keys": "redacted key",
  "redaction.patterns": "redaction pattern",
  "secrets.allow": "allowed secret",
  "secrets.providers": "secret provider",
  "network.allow": "network host",
  "network.presets": "network preset",
  "network.private": "private address allowed",
  "network.credentials": "network credential",
  "network.trust": "host trusted after approvals",
  "sandbox.allowlist": "sandbox allowlist host",
  "sandbox.images": "image a run may name",
  "sandbox.registryAuth": "registry credential",
  "trust.rules": "trust rule",
};

/** Lists whose entries have a name: an entry whose name is in both is "changed". */
const KEYED_LISTS: Record<string, string> = {
  "trust.rules": "name",
  "network.trust": "host",
  "network.credentials": "host",
  "sandbox.registryAuth": "registry",
};

const APPROVAL_WORDS: Record<string, string> = {
  never: "never (runs without a person)",
  always: "always (every call waits for a person)",
  risk: "risk (the risk rules decide)",
  reviewer: "reviewer (the model reviewer answers first; a person when it asks)",
};

/** Default approval of a capability the policy does not list (decide.ts). */
const DEFAULT_APPROVAL: Record<string, string> = { "repo.read": "never", "repo.search": "never" };

/** Every difference between `a` and `b`, capabilities first, then fields in order. */
export function diffPolicies(a: Policy, b: Policy): PolicyDifference[] {
  const out: PolicyDifference[] = [];
  diffCapabilities(a.capabilities, b.capabilities, out);
  const { capabilities: _ca, ...restA } = a;
  const { capabilities: _cb, ...restB } = b;
  diffValue("", restA, restB, out);
  return out;
}

function diffCapabilities(
  a: Policy["capabilities"],
  b: Policy["capabilities"],
  out: PolicyDifference[],
): void {
  const names = [...new Set([...CAPABILITY_NAMES, ...Object.keys(a), ...Object.keys(b)])];
  for (const name of names) {
    const ca = (a as Record<string, { approval: string; timeout?: number } | undefined>)[name];
    const cb = (b as Record<string, { approval: string; timeout?: number } | undefined>)[name];
    const field = `capabilities.${name}`;
    const modeA = ca?.approval ?? DEFAULT_APPROVAL[name] ?? "risk";
    const modeB = cb?.approval ?? DEFAULT_APPROVAL[name] ?? "risk";
    const dflt = (c: unknown) => (c === undefined ? " (not listed: the default)" : "");
    if (modeA !== modeB)
      out.push({
        field: `${field}.approval`,
        text: `capability ${name}: approval changed from ${APPROVAL_WORDS[modeA] ?? modeA}${dflt(ca)} to ${APPROVAL_WORDS[modeB] ?? modeB}${dflt(cb)}`,
      });
    else if ((ca === undefined) !== (cb === undefined))
      out.push({
        field,
        text: `capability ${name}: ${ca === undefined ? "now listed" : "no longer listed"} with its default approval ${modeA} (decisions unchanged)`,
      });
    if (ca?.timeout !== cb?.timeout)
      out.push({
        field: `${field}.timeout`,
        text: `capability ${name}: call timeout changed from ${ms(ca?.timeout)} to ${ms(cb?.timeout)}`,
      });
  }
}

const ms = (v: number | undefined) => (v === undefined ? "the default" : `${v}ms`);

const isMapping = (x: unknown): x is Record<string, unknown> =>
  x !== null && typeof x === "object" && !Array.isArray(x);

/** Mappings key by key, lists as sets (plus their order), anything else as a value. */
function diffValue(field: string, a: unknown, b: unknown, out: PolicyDifference[]): void {
  if (canonicalJson(a ?? null) === canonicalJson(b ?? null)) return;
  if (isMapping(a) && isMapping(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort())
      diffValue(field === "" ? k : `${field}.${k}`, a[k], b[k], out);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    diffList(field, a, b, out);
    return;
  }
  out.push({ field, text: `${field}: changed from ${show(a)} to ${show(b)}` });
}

function diffList(field: string, a: unknown[], b: unknown[], out: PolicyDifference[]): void {
  const noun = LIST_NOUNS[field] ?? "entry";
  const key = KEYED_LISTS[field];
  const nameOf = (x: unknown) =>
    key !== undefined && isMapping(x) && typeof x[key] === "string"
      ? (x[key] as string)
      : undefined;
  const named = (xs: unknown[]) =>
    new Map(xs.flatMap((x) => (nameOf(x) === undefined ? [] : [[nameOf(x) as string, x]])));
  const na = named(a);
  const nb = named(b);
  const canonA = new Set(a.map((x) => canonicalJson(x)));
  const canonB = new Set(b.map((x) => canonicalJson(x)));
  const before = out.length;
  for (const x of a) {
    if (canonB.has(canonicalJson(x))) continue;
    const name = nameOf(x);
    if (name !== undefined && nb.has(name)) {
      out.push({
        field,
        text: `${field}: ${noun} ${JSON.stringify(name)} changed from ${show(x)} to ${show(nb.get(name))}`,
      });
    } else out.push({ field, text: `${field}: ${noun} removed: ${show(x)}` });
  }
  for (const x of b) {
    if (canonA.has(canonicalJson(x))) continue;
    const name = nameOf(x);
    if (name !== undefined && na.has(name)) continue; // reported as changed above
    out.push({ field, text: `${field}: ${noun} added: ${show(x)}` });
  }
  // The same entries, yet the lists differ: repeated entries, or another order.
  if (out.length === before)
    out.push({
      field,
      text:
        a.length === b.length
          ? `${field}: same entries in another order, from ${show(a)} to ${show(b)}`
          : `${field}: same entries, repeated differently, from ${show(a)} to ${show(b)}`,
    });
}

/** A value as JSON (strings quoted, so a space or an empty string shows). */
function show(v: unknown): string {
  return v === undefined ? "(unset)" : canonicalJson(v);
}
