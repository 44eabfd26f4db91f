/**
 * `agentd policy diff A B`: loads two policy files as the server would (`extends`
 * resolved, defaults applied) and prints how they differ, rule by rule, with each file's
 * digest. Exit codes as diff(1): 0 the same policy, 1 they differ, 2 trouble (a file that
 * does not load: every issue as FILE:LINE:COL: field: message, naming the file at fault).
 *
 * Must never: print a policy value unescaped (a file may hold escape sequences), or call
 * two policies the same when their digests differ.
 */

import { diffPolicies } from "../kernel/policy-diff.ts";
import { policyDigest, shortDigest } from "../kernel/policy-digest.ts";
import { formatPolicyIssues, readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { escapeControls } from "./terminal-safe.ts";

export const POLICY_DIFF_HELP = `Usage: agentd policy diff A B

Compares two policy files as agentd enforces them (extends resolved, defaults applied;
formatting, key order and units do not count) and prints each difference by rule:
capability approvals, deny and high-risk commands, secret paths, network hosts, trust
rules, limits. Each file's digest (sha256 of the canonical JSON, as policy.decision
records it) heads the output.

Exit status: 0 the same policy, 1 they differ, 2 a file did not load (its issues are
printed as FILE:LINE:COL: field: message).
`;

export interface DiffOutput {
  out: (s: string) => void;
  err: (s: string) => void;
}

/** Runs the comparison; answers the exit code. */
export function policyDiffCommand(fileA: string, fileB: string, io: DiffOutput): number {
  const loaded: Policy[] = [];
  let trouble = false;
  for (const file of [fileA, fileB]) {
    const r = readPolicyFile(file);
    if (r.ok) loaded.push(r.policy);
    else {
      trouble = true;
      io.err(`${escapeControls(formatPolicyIssues(r.errors))}\n`);
    }
  }
  if (trouble) return 2;
  const [a, b] = loaded as [Policy, Policy];
  const da = policyDigest(a);
  const db = policyDigest(b);
  const name = (f: string, d: string) => `${escapeControls(f)} (sha256 ${shortDigest(d)})`;
  const diffs = diffPolicies(a, b);
  if (da === db) {
    // Invariant: the diff sees what the digest sees.
    if (diffs.length > 0) throw new Error("policy diff: differences under one digest");
    io.out(`same policy: ${name(fileA, da)} and ${name(fileB, db)}\n`);
    return 0;
  }
  io.out(`--- ${name(fileA, da)}\n+++ ${name(fileB, db)}\n`);
  for (const d of diffs) io.out(`${escapeControls(d.text)}\n`);
  if (diffs.length === 0)
    io.out("(the digests differ in a field this command does not describe)\n");
  return 1;
}
