/**
 * Shadow mode for the model reviewer's gate: a call both policies send to the reviewer
 * (`preview+approval`, `approval: reviewer`) is still decided differently when the facts
 * each policy's `reviewer.personFor` marks differ for it — one lets the reviewer's allow
 * run the call, the other sends it to a person whatever the reviewer says. The candidate's
 * decision then names its gate (`…; reviewer.personFor: FACTS`), so the difference is a
 * `policy.shadow` like any other. Pure.
 *
 * Must never: change the enforced decision, or report a difference the two gates do not
 * make for this call (facts absent from both lists change nothing).
 */
import type { Decision } from "./decide.ts";
import type { DecidedCall } from "./kernel.ts";
import type { Policy } from "./policy-schema.ts";
import { personFactsOf } from "./reviewer/person-facts.ts";

export function withReviewerGate(
  enforced: DecidedCall,
  candidate: Decision,
  enforcedPolicy: Policy,
  candidatePolicy: Policy,
): Decision {
  if (enforced.decision.reviewer !== true || candidate.reviewer !== true) return candidate;
  const facts = (p: Policy) => personFactsOf(enforced.assessment, p.reviewer.personFor).join(",");
  const mine = facts(enforcedPolicy);
  const theirs = facts(candidatePolicy);
  if (mine === theirs) return candidate;
  return {
    ...candidate,
    rule: `${candidate.rule}; reviewer.personFor: ${theirs || "none"}`,
    reason:
      theirs === ""
        ? `${candidate.reason} (the reviewer's allow would be taken: no personFor fact holds)`
        : `${candidate.reason} (a person decides whatever the reviewer says: ${theirs})`,
  };
}
