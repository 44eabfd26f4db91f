/**
 * Which policy decided a call, as agentctl and the console show it beside a decision: its source, file
 * and short digest ("server policy.yaml sha256:3f2a9c0d1b7e"). The digest is what
 * `agentd policy diff` and `policy.changed` name, so a person can match them up.
 *
 * Must never: escape (agentctl passes an escaped message, the console renders text as
 * text), or import anything a browser cannot load (the console bundles it).
 */
import { type PolicyDecision, PolicySource } from "../gen/agentd/v1/events_pb.js";

const SOURCES: Record<number, string> = {
  [PolicySource.SERVER]: "server",
  [PolicySource.TENANT]: "tenant",
  [PolicySource.RUN_OVERRIDE]: "run override",
};

/** "server policy.yaml sha256:3f2a9c0d1b7e"; "" for a decision recorded without one. */
export function policyLabel(
  v: Pick<PolicyDecision, "policyDigest" | "policySource" | "policyFile">,
): string {
  if (v.policyDigest === "") return "";
  const source = SOURCES[v.policySource] ?? "unknown";
  const file = v.policyFile === "" ? "" : ` ${v.policyFile}`;
  return `${source}${file} sha256:${v.policyDigest.slice(0, 12)}`;
}
