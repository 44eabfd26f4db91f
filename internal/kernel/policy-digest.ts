/**
 * A policy's identity: the sha256 (hex) of its canonical JSON. The canonical form is the
 * policy as the kernel enforces it — `extends` resolved, defaults applied, sizes and
 * durations in bytes and milliseconds (the schema's output) — with object keys sorted and
 * no whitespace; lists keep their order. Reformatting or reordering the YAML's keys, or
 * writing "1MiB" for 1048576, does not change the digest; any change of what is enforced
 * does. Computed once per loaded policy object (a load makes a new object) and cached, so
 * a decision pays a WeakMap lookup.
 *
 * Must never: hash the file's text (formatting would change it), or be computed from a
 * policy other than the one that decides.
 */
import { canonicalJson } from "../eventlog/canonical-json.ts";
import { sha256Hex } from "../eventlog/hash-chain.ts";
import type { Policy } from "./policy-schema.ts";

const digests = new WeakMap<Policy, string>();

/** The canonical JSON of a loaded policy (what the digest covers). */
export function canonicalPolicyJson(policy: Policy): string {
  return canonicalJson(policy);
}

/** sha256 (hex) of the policy's canonical JSON; computed once per policy object. */
export function policyDigest(policy: Policy): string {
  let d = digests.get(policy);
  if (d === undefined) {
    d = sha256Hex(canonicalPolicyJson(policy));
    digests.set(policy, d);
  }
  return d;
}

/** A digest shortened for people (12 hex digits), as git shortens commits. */
export function shortDigest(digest: string): string {
  return digest.slice(0, 12);
}
