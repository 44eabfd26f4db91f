/**
 * A proposed rule written into a policy file's text: `approvedCommands` gets
 * `{command, repo, change}`, `network.allow` gets `host:port`, each with a comment naming
 * the change and its proposer. The edit keeps the rest of the file (comments included) as
 * it is; when the file `extends` another and does not hold the list itself, the list it
 * inherits is copied in first (lists replace the base's whole: the edit must add, never
 * drop what the base allows). The result is loaded like any policy before it is offered.
 *
 * Must never: produce a file that does not load, drop an entry the policy had, or add a
 * rule the policy already has.
 */
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { createTwoFilesPatch } from "diff";
import { isSeq, parseDocument } from "yaml";
import { matchRule, parseHostRule } from "../egress/destination.ts";
import { AgentdError } from "../errors.ts";
import { parsePolicy, resolveRelative } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { StoredRule } from "./port.ts";

export interface PolicyEdit {
  /** sha256 (hex) of the file's bytes the edit was made on. */
  baseSha256: string;
  newText: string;
  /** Unified diff, labelled with the file's base name. */
  diff: string;
  /** The policy after the edit (loaded from newText). */
  policy: Policy;
}

export function sha256Hex(text: string | Buffer): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Whether `policy` already has `rule` (then there is nothing to propose). */
export function alreadyHas(policy: Policy, rule: StoredRule): boolean {
  if (rule.kind === "command")
    return policy.approvedCommands.some((r) => r.command === rule.command && r.repo === rule.repo);
  const at = rule.host.lastIndexOf(":");
  const rules = [...policy.network.allow, ...policy.sandbox.allowlist].flatMap((e) => {
    const r = parseHostRule(e);
    return "error" in r ? [] : [r];
  });
  return matchRule(rules, rule.host.slice(0, at), Number(rule.host.slice(at + 1))) !== undefined;
}

/**
 * `bytes` (the file at `path`, loaded as `current`) with `rule` added. Throws ECONFLICT
 * when the policy already has it, ECONFLICT too when the edited file would not load.
 */
export function editPolicy(
  path: string,
  bytes: Buffer,
  current: Policy,
  rule: StoredRule,
  note: { changeId: string; proposedBy: string; approvalId: string },
): PolicyEdit {
  if (alreadyHas(current, rule))
    throw new AgentdError(
      "ECONFLICT",
      `the policy (${basename(path)}) already has this rule (${ruleText(rule)})`,
      { field: "propose_rule" },
    );
  const text = bytes.toString("utf8");
  const doc = parseDocument(text);
  if (doc.errors.length > 0)
    throw new AgentdError("ECONFLICT", `the policy ${path} is not YAML the editor can read`);
  const listPath = rule.kind === "command" ? ["approvedCommands"] : ["network", "allow"];
  const inherited: unknown[] =
    rule.kind === "command"
      ? current.approvedCommands.map((r) => ({ ...r }))
      : current.network.allow;
  if (!isSeq(doc.getIn(listPath))) doc.setIn(listPath, doc.createNode([...inherited]));
  const item = doc.createNode(
    rule.kind === "command"
      ? { command: rule.command, repo: rule.repo, change: note.changeId }
      : rule.host,
  );
  // The names are plain text in a comment: anything but a few safe characters becomes "?"
  // (a \r or \n would end the comment and put the rest of the name into the policy).
  item.commentBefore = ` ${note.changeId}: proposed by ${commentSafe(note.proposedBy)} approving ${commentSafe(note.approvalId)}`;
  doc.addIn(listPath, item);
  const newText = doc.toString();
  const parsed = parsePolicy(newText, path, resolveRelative);
  if (!parsed.ok)
    throw new AgentdError(
      "ECONFLICT",
      `the policy with this rule would not load: ${parsed.errors[0]?.field}: ${parsed.errors[0]?.message}`,
    );
  const name = basename(path);
  const diff = createTwoFilesPatch(name, name, text, newText, "current", `with ${note.changeId}`);
  return { baseSha256: sha256Hex(bytes), newText, diff, policy: parsed.policy };
}

/** `text` for a YAML comment: letters, digits and ` ._@:/+-` only, at most 128 characters. */
export function commentSafe(text: string): string {
  return text.slice(0, 128).replace(/[^A-Za-z0-9 ._@:/+-]/g, "?");
}

/** The rule in words ("npm test in repo web", "host registry.example.com:443"). */
export function ruleText(rule: StoredRule): string {
  return rule.kind === "command"
    ? `command ${rule.command} in repo ${rule.repo}`
    : `host ${rule.host}`;
}
