/**
 * Which policy decided a call, as recorded on each `policy.decision`: the policy's digest
 * (policy-digest.ts), whose policy it was (server file, tenant file; a run override is a
 * proto value kept for later) and the file's base name.
 *
 * Must never: record a file's directory (a tenant reads its decisions; the server's
 * filesystem layout is not theirs to see), compute the digest per decision, or throw.
 */
import { basename } from "node:path";
import { PolicySource } from "../gen/agentd/v1/events_pb.js";
import { policyDigest } from "./policy-digest.ts";
import type { Policy } from "./policy-schema.ts";

/** The proto value of a policy source. */
export function policySourceEnum(source: "tenant" | "server"): PolicySource {
  return source === "tenant" ? PolicySource.TENANT : PolicySource.SERVER;
}

/** The proto's value in words ("server", "tenant", "run override"; "" when unrecorded). */
export function policySourceName(source: PolicySource): string {
  switch (source) {
    case PolicySource.SERVER:
      return "server";
    case PolicySource.TENANT:
      return "tenant";
    case PolicySource.RUN_OVERRIDE:
      return "run override";
    default:
      return "";
  }
}

export interface DecisionProvenance {
  policyDigest: string;
  policySource: PolicySource;
  policyFile: string;
}

/** The last fields made per policy object: a decision reuses them (no per-call work). */
const made = new WeakMap<
  Policy,
  { source: string; path: string | undefined; fields: DecisionProvenance }
>();

/**
 * The digest, or "" when the policy cannot be serialised: the kernel is total (a policy
 * whose reading throws is a refusal by kernel.decide, recorded like any decision), so its
 * provenance must not throw either. A loaded policy is plain data and always has one; an empty `policy_digest` means unknown.
 */
function digestOrNone(policy: Policy): string {
  try {
    return policyDigest(policy);
  } catch {
    return "";
  }
}

/** The provenance fields of a policy.decision (PolicyDecision fields 7-9); do not mutate. */
export function decisionProvenance(
  policy: Policy,
  source: "tenant" | "server",
  path: string | undefined,
): DecisionProvenance {
  const last = made.get(policy);
  if (last !== undefined && last.source === source && last.path === path) return last.fields;
  const fields = {
    policyDigest: digestOrNone(policy),
    policySource: policySourceEnum(source),
    policyFile: path === undefined ? "" : basename(path),
  };
  made.set(policy, { source, path, fields });
  return fields;
}
