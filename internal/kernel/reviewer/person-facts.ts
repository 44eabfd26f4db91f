/**
 * Which of the policy's `reviewer.personFor` facts hold for a call: the facts that make a
 * reviewer's allow a question for a person. Read from the assessment itself (the risk
 * profile and the rules that matched), not only from the risk facts `risk.approvalWhen`
 * enabled: turning a fact off for `approval: risk` must never let a reviewer allow it.
 * Must never answer "none" for a call it cannot read: a malformed assessment counts as
 * every fact.
 */
import type { Assessment } from "../risk.ts";
import { PERSON_FACTS, type PersonFact } from "./reviewer-schema.ts";

/**
 * The facts of `a` among `personFor` (in PERSON_FACTS order). `deletes`: the call's preview
 * says it deletes a file (a repo.patch whose diff ends in /dev/null).
 */
export function personFactsOf(
  a: Assessment,
  personFor: readonly PersonFact[],
  deletes = false,
): PersonFact[] {
  const held = factsOf(a);
  if (deletes) held.add("deletesFile");
  return PERSON_FACTS.filter((f) => personFor.includes(f) && held.has(f));
}

function factsOf(a: Assessment): Set<PersonFact> {
  const out = new Set<PersonFact>();
  if (!Array.isArray(a.matched) || !Array.isArray(a.approvalFacts) || a.risk === undefined)
    return new Set(PERSON_FACTS);
  const rules = [...a.matched, ...a.approvalFacts];
  const any = (p: (r: string) => boolean) => rules.some(p);
  if (
    any(
      (r) =>
        r.startsWith("risk.highRiskCommands") ||
        r.startsWith("destructive:") ||
        r === "risk.approvalWhen.highRiskCommand",
    )
  )
    out.add("highRiskCommand");
  if (any((r) => r === "risk.approvalWhen.dynamicShell" || r.startsWith("dynamic:")))
    out.add("dynamicShell");
  if (any((r) => r === "risk.approvalWhen.runWrittenScript" || r.startsWith("provenance:")))
    out.add("runWrittenScript");
  if (any((r) => r.startsWith("workspace.denyPatterns"))) out.add("mentionsDeniedPath");
  if (a.risk.touchesSecrets) out.add("touchesSecrets");
  if (a.risk.touchesConfig) out.add("touchesConfig");
  if (a.risk.touchesBuild) out.add("touchesBuild");
  if (a.risk.estimatedImpact === "high") out.add("highImpact");
  return out;
}
