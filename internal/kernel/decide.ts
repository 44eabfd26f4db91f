/**
 * The control path of a call: auto, preview+auto, preview+approval or deny. Pure: the same
 * policy, call, assessment and trust counters always give the same decision, and the
 * decision names the rule that made it. Deny is only for invariant or policy violations
 * (the assessment's `deny`); everything else is a question of how much a person sees.
 */
import { type ApprovedScope, approvedCommandRule } from "./approved-commands.ts";
import type { Policy } from "./policy-schema.ts";
import { RUN_WRITTEN_SCRIPT } from "./provenance.ts";
import type { Assessment } from "./risk.ts";
import { matchingTrustRules, type TrustCounters } from "./trust.ts";

export type ControlPath = "auto" | "preview+auto" | "preview+approval" | "deny";

export interface Decision {
  path: ControlPath;
  /** The rule that decided, e.g. "capabilities.repo.patch.approval=always". */
  rule: string;
  /** In words; for a deny, what the model is told. */
  reason: string;
  /** Trust rules applied, as "relax:NAME" or "tighten:NAME". */
  trustAdjustments: string[];
  /**
   * Set on a preview+approval under `approval: reviewer`: the model reviewer answers
   * first (kernel/reviewer/), a person only when it asks.
   */
  reviewer?: boolean;
}

/** Default approval mode of a capability not named in the policy. */
const DEFAULT_MODE: Record<string, "never" | "risk"> = {
  "repo.read": "never",
  "repo.search": "never",
};

export function decide(
  tool: string,
  a: Assessment,
  policy: Policy,
  counters: TrustCounters,
  scope?: ApprovedScope,
): Decision {
  if (a.deny !== undefined)
    return { path: "deny", rule: a.deny.rule, reason: a.deny.reason, trustAdjustments: [] };
  const cap = policy.capabilities[tool as keyof Policy["capabilities"]];
  const mode = cap?.approval ?? DEFAULT_MODE[tool] ?? "risk";
  const readOnly = a.risk.category === "read";
  let d: Decision;
  if (mode === "always") {
    d = {
      path: "preview+approval",
      rule: `capabilities.${tool}.approval=always`,
      reason: "policy asks a person for every call of this tool",
      trustAdjustments: [],
    };
  } else if (mode === "reviewer") {
    d = {
      path: "preview+approval",
      rule: `capabilities.${tool}.approval=reviewer`,
      reason: "the model reviewer answers for this tool (a person when it asks)",
      trustAdjustments: [],
      reviewer: true,
    };
  } else if (mode === "never" && a.risk.touchesSecrets && policy.risk.approvalWhen.touchesSecrets) {
    // Secrets are gated even for tools that otherwise never ask (reading .env with
    // repo.read): only risk.approvalWhen.touchesSecrets: false lifts it.
    d = {
      path: "preview+approval",
      rule: "risk.approvalWhen.touchesSecrets",
      reason: `a person must approve: the call touches secrets (matched ${a.matched.join(", ")})`,
      trustAdjustments: [],
    };
  } else if (mode === "never" && a.approvalFacts.includes(RUN_WRITTEN_SCRIPT)) {
    // A file the run itself wrote decides what runs (a package.json script, a Makefile, a
    // lint config): a tool that never asks (lint.run, setup.run) would run the model's code
    // unseen. Only risk.approvalWhen.runWrittenScript: false lifts it.
    d = {
      path: "preview+approval",
      rule: RUN_WRITTEN_SCRIPT,
      reason: `a person must approve: the call runs files the run wrote or changed (matched ${a.matched.join(", ")})`,
      trustAdjustments: [],
    };
  } else if (mode === "never") {
    d = {
      path: readOnly ? "auto" : "preview+auto",
      rule: `capabilities.${tool}.approval=never`,
      reason: "policy lets this tool run without approval",
      trustAdjustments: [],
    };
  } else if (a.approvalFacts.length > 0) {
    d = {
      path: "preview+approval",
      rule: a.approvalFacts[0] as string,
      reason: `a person must approve: ${a.approvalFacts.join(", ")}${a.matched.length > 0 ? ` (matched ${a.matched.join(", ")})` : ""}`,
      trustAdjustments: [],
    };
  } else {
    d = {
      path: readOnly ? "auto" : "preview+auto",
      rule: `capabilities.${tool}.approval=risk`,
      reason: "low risk",
      trustAdjustments: [],
    };
  }
  // A command family a person approved into the policy (approvedCommands) answers for the
  // facts it speaks to, under approval: risk only (approved-commands.ts).
  if (d.path === "preview+approval" && mode === "risk") {
    const approved = approvedCommandRule(tool, a, policy, scope);
    if (approved !== undefined)
      d = {
        path: "preview+auto",
        rule: approved,
        reason: `allowed by ${approved.replace(":", " ")} (a rule from an approval)`,
        trustAdjustments: [],
      };
  }
  // Adaptive trust may relax an approval the risk profile asked for (never one policy
  // demands for every call, never one for secrets or for files the run wrote that decide
  // what runs), or tighten any non-deny path.
  for (const rule of matchingTrustRules(policy, tool, counters)) {
    if (
      rule.then === "relax" &&
      d.path === "preview+approval" &&
      mode === "risk" &&
      !a.risk.touchesSecrets &&
      !a.approvalFacts.includes(RUN_WRITTEN_SCRIPT)
    ) {
      d = {
        path: "preview+auto",
        rule: `trust.rules:${rule.name}`,
        reason: `relaxed by trust rule ${rule.name}`,
        trustAdjustments: [...d.trustAdjustments, `relax:${rule.name}`],
      };
    } else if (rule.then === "tighten" && (d.path !== "preview+approval" || d.reviewer === true)) {
      // Tighten means a person: a reviewer's say is taken away too.
      d = {
        path: "preview+approval",
        rule: `trust.rules:${rule.name}`,
        reason: `tightened by trust rule ${rule.name}`,
        trustAdjustments: [...d.trustAdjustments, `tighten:${rule.name}`],
      };
    }
  }
  return d;
}
