/**
 * Shadow mode: what a candidate policy would have decided for a call the enforced policy
 * just decided (docs/policy.md, "Shadow mode"). Pure and synchronous: it reuses what the
 * enforced path found in the container (the provenance and replace probes' facts, the
 * containment guard's verdict) and never probes itself; where the candidate would need a
 * fact the enforced path did not gather, the candidate's answer is "ask a person"
 * (rule SHADOW_UNPROBED), as the kernel does under containment.
 *
 * Must never: throw (a candidate that makes assessment throw is recorded as the refusal
 * the kernel would have made), touch the sandbox, the log or the enforced decision, or be
 * read by anything that decides what a call does.
 */
import { pickCommands, type RunCommands } from "../tools/command-spec.ts";
import { toolByName } from "../tools/registry.ts";
import type { ApprovedScope } from "./approved-commands.ts";
import { type Decision, decide } from "./decide.ts";
import type { Policy } from "./policy-schema.ts";
import { applyProvenance } from "./provenance.ts";
import { applyReplacing, needsReplacingProbe, type ReplacingFound } from "./replace-probe.ts";
import { type Assessment, assess, type CompiledRisk } from "./risk.ts";
import { runsRunner } from "./runner-files.ts";
import type { TrustCounters } from "./trust.ts";

/** The rule of a candidate decision that needed a probe the enforced path did not run. */
export const SHADOW_UNPROBED = "shadow.unprobed";
/** The rule of a candidate decision whose evaluation threw. */
export const SHADOW_REFUSED = "kernel.decide";

/** What the enforced path learned from the container for this call (kernel.ts). */
export interface ProbeFacts {
  /** The provenance probe: the scripts it looked at and which the run changed; pristine: none could be. */
  provenance?:
    | { pristine: true }
    | {
        pristine: false;
        scripts: ReadonlySet<string>;
        changed: ReadonlySet<string>;
        /** The runner trees were scanned; their entries some non-runner call wrote. */
        treeWritten?: readonly string[];
      };
  /** The replace probe's findings for the command line it probed. */
  replacing?: { line: string; found: ReplacingFound };
}

/** The enforced side, as the candidate needs it. */
export interface EnforcedCall {
  tool: string;
  input: unknown;
  decision: Decision;
  /** The call was denied before assessment (unknown tool, invalid input): no policy differs. */
  invalid: boolean;
  /** The containment guard asked a person for held files (secret-containment.ts). */
  contained?: Decision;
  probes: ProbeFacts;
}

export interface CandidateContext {
  policy: Policy;
  compiled: (p: Policy) => CompiledRisk;
  counters: TrustCounters;
  detected?: RunCommands;
  /** The run holds a secret: no probe judges any call (kernel.ts probeFree). */
  tainted: boolean;
  /** The run's base index exists (a drive, not a bare KernelRun): provenance applies. */
  hasBase: boolean;
  /** The run's repository and the call's line: the candidate's approvedCommands match it. */
  scope?: ApprovedScope;
}

/** The candidate's decision for the call. Total. */
export function candidateDecision(e: EnforcedCall, c: CandidateContext): Decision {
  try {
    return candidateStrict(e, c);
  } catch (err) {
    return {
      path: "deny",
      rule: SHADOW_REFUSED,
      reason: `the candidate policy could not decide on this call (${err instanceof Error ? err.message.slice(0, 200) : "a non-error value was thrown"})`,
      trustAdjustments: [],
    };
  }
}

function candidateStrict(e: EnforcedCall, c: CandidateContext): Decision {
  if (e.invalid) return e.decision; // decided before any policy was read
  const tool = toolByName(e.tool);
  const parsed = tool?.input.safeParse(e.input);
  if (tool === undefined || parsed === undefined || !parsed.success) return e.decision;
  const input = parsed.data as Record<string, unknown>;
  const commands = pickCommands(c.policy.tools, c.detected);
  let a = assess(e.tool, input, c.policy, c.compiled(c.policy), commands);
  let d = decide(e.tool, a, c.policy, c.counters, c.scope);
  if (c.tainted) d = probeFree(e.tool, a, d, c.hasBase);
  else if (d.path !== "deny") {
    const judged = withFacts(e, c, a);
    if (typeof judged === "string") return unprobed(d, judged);
    if (judged !== a) {
      a = judged;
      d = decide(e.tool, a, c.policy, c.counters, c.scope);
    }
  }
  if (e.contained !== undefined && d.path !== "deny") return e.contained;
  return d;
}

/**
 * The candidate's assessment with the enforced path's probe facts applied, or the reason
 * it needs a probe the enforced path did not run.
 */
function withFacts(e: EnforcedCall, c: CandidateContext, a0: Assessment): Assessment | string {
  let a = a0;
  const scripts = a.scripts ?? [];
  const trees = runsRunner(e.tool, scripts);
  if (c.hasBase && (scripts.length > 0 || trees)) {
    const p = e.probes.provenance;
    if (p === undefined) return "which files the run wrote (provenance probe)";
    if (!p.pristine) {
      if (scripts.some((s) => !p.scripts.has(s)))
        return "which files the run wrote (provenance probe)";
      if (trees && p.treeWritten === undefined) return "the runner trees (provenance probe)";
      a = applyProvenance(a, p.changed, c.policy, p.treeWritten ?? []);
    }
  }
  const analysis = a.command?.analysis;
  if (a.deny === undefined && needsReplacingProbe(analysis)) {
    const r = e.probes.replacing;
    if (r === undefined || r.line !== a.command?.line)
      return "whether a copy or move replaces a file (replace probe)";
    a = applyReplacing(a, r.found, c.policy);
  }
  return a;
}

/** As kernel.ts probeFree: a call a probe would judge asks while the run holds a secret. */
function probeFree(tool: string, a: Assessment, d: Decision, hasBase: boolean): Decision {
  if (d.path === "deny" || d.path === "preview+approval") return d;
  const scripts = a.scripts ?? [];
  const probed =
    (hasBase && (scripts.length > 0 || runsRunner(tool, scripts))) ||
    needsReplacingProbe(a.command?.analysis);
  return probed ? { ...d, path: "preview+approval" } : d;
}

function unprobed(d: Decision, what: string): Decision {
  if (d.path === "preview+approval") return d; // asks anyway
  return {
    path: "preview+approval",
    rule: SHADOW_UNPROBED,
    reason: `the candidate would need ${what}, which the enforced path did not run; shadow mode never probes, so it counts as asking a person`,
    trustAdjustments: d.trustAdjustments,
  };
}

/** True when the two decisions differ in control path or rule (what policy.shadow records). */
export function decisionsDiffer(enforced: Decision, candidate: Decision): boolean {
  return enforced.path !== candidate.path || enforced.rule !== candidate.rule;
}
