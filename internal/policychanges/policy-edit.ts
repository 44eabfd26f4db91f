/**
 * A proposed rule written into a policy file's text: `approvedCommands` gets
 * `{command, repo, change}`, `network.allow` gets `host:port`, each after a comment naming
 * the change and its proposer. The edit is a splice of new lines into the text (after the
 * list's last item, in place of an empty `[]`, or a new block at the end), so the rest of
 * the file stays byte for byte and the diff shows only the rule; a layout it cannot splice
 * into is rewritten through the `yaml` Document API instead. When the file `extends` another
 * and does not hold the list itself, the list it inherits is copied in first (a list
 * replaces its base's whole: the edit must add, never drop).
 *
 * Must never: produce a file that does not load, or whose policy differs from the current
 * one by anything but the one new entry (checked on the canonical JSON of both), or add a
 * rule the policy already has.
 */
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { createTwoFilesPatch } from "diff";
import { type Document, isMap, isSeq, parseDocument } from "yaml";
import { matchRule, parseHostRule } from "../egress/destination.ts";
import { AgentdError } from "../errors.ts";
import { canonicalPolicyJson } from "../kernel/policy-digest.ts";
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

/** `text` for a YAML comment: letters, digits and ` ._@:/+-` only, at most 128 characters. */
export function commentSafe(text: string): string {
  return text.slice(0, 128).replace(/[^A-Za-z0-9 ._@:/+-]/g, "?");
}

type Entry = Policy["approvedCommands"][number] | string;

/** One list entry as block YAML lines (values double-quoted: JSON strings are YAML). */
function entryLines(e: Entry): string[] {
  if (typeof e === "string") return [`- ${JSON.stringify(e)}`];
  return [
    `- command: ${JSON.stringify(e.command)}`,
    `  repo: ${JSON.stringify(e.repo)}`,
    ...(e.change === undefined ? [] : [`  change: ${JSON.stringify(e.change)}`]),
  ];
}

const indented = (lines: string[], indent: string) => lines.map((l) => `${indent}${l}\n`).join("");

/**
 * The text with `added` spliced in as the list's last entry (after `comment`), or undefined
 * when the layout is not one it splices into (the caller then rewrites the document).
 */
function splice(
  text: string,
  doc: Document,
  listPath: string[],
  inherited: Entry[],
  added: Entry,
  comment: string,
): string | undefined {
  const node = doc.getIn(listPath, true);
  const newLines = [comment, ...entryLines(added)];
  if (isSeq(node) && !node.flow && node.items.length > 0) {
    const first = node.items[0] as { range?: [number, number, number] };
    const last = node.items.at(-1) as { range?: [number, number, number] };
    if (first.range === undefined || last.range === undefined) return undefined;
    const lineStart = text.lastIndexOf("\n", first.range[0] - 1) + 1;
    const indent = /^( *)- /.exec(text.slice(lineStart, first.range[0]))?.[1];
    if (indent === undefined) return undefined;
    const eol = text.indexOf("\n", last.range[1]);
    const at = eol < 0 ? text.length : eol + 1;
    const before = eol < 0 ? `${text}\n` : text.slice(0, at);
    return `${before}${indented(newLines, indent)}${text.slice(at)}`;
  }
  const all = [...inherited.flatMap(entryLines), ...newLines];
  // `key: []` at the top level: the empty list's text becomes the block.
  if (listPath.length === 1 && isSeq(node) && node.flow && node.items.length === 0) {
    const r = (node as { range?: [number, number, number] }).range;
    if (r === undefined || text.slice(r[0], r[1]).replace(/\s/g, "") !== "[]") return undefined;
    return `${text.slice(0, r[0]).trimEnd()}\n${indented(all, "  ")}${text.slice(r[1]).replace(/^[ \t]*\n?/, "")}`;
  }
  // Absent: a new block at the end (network: only when the file has no network at all).
  if (node !== undefined) return undefined;
  if (listPath.length === 2 && doc.getIn([listPath[0] as string], true) !== undefined)
    return undefined;
  if (!isMap(doc.contents)) return undefined;
  const head = listPath.length === 1 ? "" : `${listPath[0]}:\n`;
  const key = listPath.at(-1) as string;
  const pad = listPath.length === 1 ? "" : "  ";
  const body = indented(all, `${pad}  `);
  const sep = text.length === 0 || text.endsWith("\n") ? "" : "\n";
  return `${text}${sep}${head}${pad}${key}:\n${body}`;
}

/** The document rewritten with `added` in the list (the fallback: it reformats some). */
function rewrite(
  doc: Document,
  listPath: string[],
  inherited: Entry[],
  added: Entry,
  comment: string,
) {
  const node = doc.getIn(listPath, true);
  if (!isSeq(node)) doc.setIn(listPath, doc.createNode([...inherited]));
  const seq = doc.getIn(listPath, true);
  if (isSeq(seq)) seq.flow = false;
  const item = doc.createNode(added);
  item.commentBefore = comment.replace(/^#/, "");
  doc.addIn(listPath, item);
  return doc.toString();
}

/** The policy from `newText` when it is `current` with `added` as the list's last entry. */
function checked(path: string, newText: string, current: Policy, rule: StoredRule, added: Entry) {
  const parsed = parsePolicy(newText, path, resolveRelative);
  if (!parsed.ok) return undefined;
  const expected: Policy =
    rule.kind === "command"
      ? {
          ...current,
          approvedCommands: [...current.approvedCommands, added as Exclude<Entry, string>],
        }
      : {
          ...current,
          network: { ...current.network, allow: [...current.network.allow, added as string] },
        };
  return canonicalPolicyJson(parsed.policy) === canonicalPolicyJson(expected)
    ? parsed.policy
    : undefined;
}

/**
 * `bytes` (the file at `path`, loaded as `current`) with `rule` added. Throws ECONFLICT
 * when the policy already has it, or when no edit of the file gives exactly that policy.
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
    throw new AgentdError(
      "ECONFLICT",
      `the policy ${basename(path)} is not YAML the editor can read`,
    );
  const listPath = rule.kind === "command" ? ["approvedCommands"] : ["network", "allow"];
  const inherited: Entry[] =
    rule.kind === "command"
      ? current.approvedCommands.map((r) => ({ ...r }))
      : [...current.network.allow];
  const added = entryOf(rule, note.changeId);
  // The names are plain text in a comment: anything but a few safe characters becomes "?"
  // (a \r or \n would end the comment and put the rest of the name into the policy).
  const comment = `# ${note.changeId}: proposed by ${commentSafe(note.proposedBy)} approving ${commentSafe(note.approvalId)}`;
  let newText = splice(text, doc, listPath, inherited, added, comment);
  let policy = newText === undefined ? undefined : checked(path, newText, current, rule, added);
  if (policy === undefined) {
    newText = rewrite(parseDocument(text), listPath, inherited, added, comment);
    policy = checked(path, newText, current, rule, added);
  }
  if (policy === undefined || newText === undefined)
    throw new AgentdError(
      "ECONFLICT",
      `the rule cannot be written into ${basename(path)} without changing anything else: add it by hand`,
      { field: "propose_rule" },
    );
  const name = basename(path);
  const diff = createTwoFilesPatch(name, name, text, newText, "current", `with ${note.changeId}`);
  return { baseSha256: sha256Hex(bytes), newText, diff, policy };
}

/** The entry a rule adds to its list (approvedCommands or network.allow). */
function entryOf(rule: StoredRule, changeId: string): Entry {
  return rule.kind === "command"
    ? { command: rule.command, repo: rule.repo, change: changeId }
    : rule.host;
}

/**
 * Whether `newText` (a change's file) is still exactly the policy in force now (`current`,
 * loaded from the file as it is, with whatever it extends as it is now) plus the change's
 * entry: a base that dropped or changed something since the proposal would be undone.
 */
export function stillOneEntry(
  path: string,
  newText: string,
  current: Policy,
  rule: StoredRule,
  changeId: string,
): boolean {
  return checked(path, newText, current, rule, entryOf(rule, changeId)) !== undefined;
}

/** The rule in words ("npm test in repo web", "host registry.example.com:443"). */
export function ruleText(rule: StoredRule): string {
  return rule.kind === "command"
    ? `command ${rule.command} in repo ${rule.repo}`
    : `host ${rule.host}`;
}
