/**
 * The rule a person asked for when approving a call, derived by the server from what the
 * log says the call was: a command family (approved-commands.ts) of the approved
 * process.run call, scoped to the run's repository, or the exact host and port of an
 * approved network call. The request names only the kind; text in it is refused.
 *
 * Must never: take a rule's text from the request or from the model's words unchecked,
 * produce a wildcard, a path, an option or a shell metacharacter, or a rule wider than the
 * call a person saw (errors name the field at fault: `propose_rule.kind`, `propose_rule`).
 */
import net from "node:net";
import { parseHostRule } from "../egress/destination.ts";
import { invalid } from "../errors.ts";
import { type Event, type ProposedRule, ProposedRuleKind } from "../gen/agentd/v1/events_pb.js";
import { REPO_RE } from "../kernel/approved-command-words.ts";
import { commandFamily, commandLineOf, familyText } from "../kernel/approved-commands.ts";
import type { ApprovalState } from "../projections/approvals.ts";
import type { StoredRule } from "./port.ts";

/** The tool of a network approval (worker/drive-egress.ts NETWORK_TOOL). */
const NETWORK_TOOL = "network";
/** A host as a network approval records it: lowercase DNS labels, at least two. */
const HOST_RE = /^(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

/** Checks the request's ProposedRule: a kind, and no text of its own. */
export function checkProposal(p: ProposedRule): "command" | "host" {
  for (const [field, v] of [
    ["command", p.command],
    ["repo", p.repo],
    ["host", p.host],
  ] as const)
    if (v !== "")
      throw invalid(
        `propose_rule.${field}`,
        "is derived by the server from the approved call; leave it empty and give only kind",
      );
  if (p.kind === ProposedRuleKind.COMMAND) return "command";
  if (p.kind === ProposedRuleKind.HOST) return "host";
  throw invalid(
    "propose_rule.kind",
    "must be PROPOSED_RULE_KIND_COMMAND or PROPOSED_RULE_KIND_HOST",
  );
}

/**
 * The rule of `kind` for approval `a` of a run whose events are `events` and whose `repo`
 * label is `repoLabel` (undefined: "default"); EVALIDATION naming the field when the call
 * cannot give one.
 */
export function deriveRule(
  kind: "command" | "host",
  a: ApprovalState,
  events: readonly Event[],
  repoLabel: string | undefined,
): StoredRule {
  return kind === "host" ? hostRule(a) : commandRule(a, events, repoLabel);
}

function commandRule(
  a: ApprovalState,
  events: readonly Event[],
  repoLabel: string | undefined,
): StoredRule {
  if (a.tool !== "process.run")
    throw invalid(
      "propose_rule.kind",
      `a command rule comes from an approved process.run call; approval ${a.approvalId} is for ${a.tool}`,
    );
  const call = events.find(
    (e) => e.payload.case === "toolCall" && e.payload.value.callId === a.callId,
  );
  if (call?.payload.case !== "toolCall")
    throw invalid("propose_rule", `the log holds no tool.call ${a.callId} for this approval`);
  let input: unknown;
  try {
    input = JSON.parse(call.payload.value.inputJson);
  } catch {
    throw invalid("propose_rule", `tool.call ${a.callId} has no readable input`);
  }
  const line = commandLineOf(input);
  if (line === undefined)
    throw invalid("propose_rule", `tool.call ${a.callId} has no command or argv`);
  const family = commandFamily(line);
  if ("problem" in family)
    throw invalid("propose_rule", `no command rule can come from this call: ${family.problem}`);
  const repo = repoLabel ?? "default";
  if (!REPO_RE.test(repo))
    throw invalid(
      "propose_rule",
      `the run's repo label ${JSON.stringify(repo)} cannot scope a rule`,
    );
  return { kind: "command", command: familyText(family.words), repo };
}

function hostRule(a: ApprovalState): StoredRule {
  if (a.tool !== NETWORK_TOOL)
    throw invalid(
      "propose_rule.kind",
      `a host rule comes from an approved network call; approval ${a.approvalId} is for ${a.tool}`,
    );
  const host = a.preview?.host ?? "";
  const port = a.preview?.port ?? 0;
  if (!HOST_RE.test(host) || host.length > 253 || net.isIP(host) !== 0 || /\.\d+$/.test(host))
    throw invalid(
      "propose_rule",
      `the approved host ${JSON.stringify(host.slice(0, 80))} is not a plain lowercase host name (no wildcards, no addresses)`,
    );
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw invalid("propose_rule", `the approved port ${port} is not 1..65535`);
  const text = `${host}:${port}`;
  const parsed = parseHostRule(text);
  if ("error" in parsed || parsed.wildcard)
    throw invalid("propose_rule", `${text} is not a host rule`);
  return { kind: "host", host: text };
}
