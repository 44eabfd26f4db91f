/**
 * Which policy decided a call, as recorded on each `policy.decision`: the policy's digest
 * (policy-digest.ts), whose policy it was (server file, tenant file; a run override is a
 * proto value kept for later) and the file's base name.
 *
 * Must never: record a file's directory (a tenant reads its decisions; the server's
 * filesystem layout is not theirs to see), or compute the digest per decision.
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

/** The provenance fields of a policy.decision (PolicyDecision fields 7-9). */
export function decisionProvenance(
  policy: Policy,
  source: "tenant" | "server",
  path: string | undefined,
): { policyDigest: string; policySource: PolicySource; policyFile: string } {
  return {
    policyDigest: policyDigest(policy),
    policySource: policySourceEnum(source),
    policyFile: path === undefined ? "" : basename(path),
  };
}
