/**
 * The policy file edit of a proposed rule: the new entry is spliced in and nothing else of
 * the file changes (removing the added lines gives the file back byte for byte), for a
 * block list, an empty `[]`, an absent key (with and without a final newline) and a
 * layered file; a flow list is rewritten but still differs by the entry alone (checked on
 * the loaded policies); hostile names stay in the comment.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parsePolicy } from "../kernel/policy-loader.ts";
import { editPolicy } from "./policy-edit.ts";
import type { StoredRule } from "./port.ts";

const NOTE = { changeId: "pc_0123456789abcdef0123", proposedBy: "alice", approvalId: "apr_R_c1" };
const CMD: StoredRule = { kind: "command", command: "npm test", repo: "web" };
const HOST: StoredRule = { kind: "host", host: "api.example.com:443" };

function edit(text: string, rule: StoredRule, note = NOTE) {
  const p = parsePolicy(text, "/p/policy.yaml", () => ({ error: "no layers here" }));
  assert.ok(p.ok, JSON.stringify(!p.ok && p.errors));
  return editPolicy("/p/policy.yaml", Buffer.from(text), p.policy, rule, note);
}

/** The new text without the lines the edit added (diff's "+" lines). */
function withoutAdded(newText: string, diff: string): string {
  const added = new Set(
    diff
      .split("\n")
      .filter((l) => l.startsWith("+") && !l.startsWith("+++"))
      .map((l) => l.slice(1)),
  );
  return newText
    .split("\n")
    .filter((l) => !added.has(l))
    .join("\n");
}

describe("editPolicy", () => {
  it("appends after a block list's last entry; the rest stays byte for byte", () => {
    const text =
      "version: 1\n# the hosts\nsandbox:\n  network: allowlist # egress\nnetwork:\n  allow:\n    - a.example.com # first\n    - b.example.com\n  # after the list\n  approval: risk\n# trailing\n";
    const e = edit(text, HOST);
    assert.equal(withoutAdded(e.newText, e.diff), text);
    assert.deepEqual(e.policy.network.allow, [
      "a.example.com",
      "b.example.com",
      "api.example.com:443",
    ]);
    assert.match(
      e.newText,
      /- b\.example\.com\n {4}# pc_0123456789abcdef0123: proposed by alice approving apr_R_c1\n {4}- "api\.example\.com:443"\n/,
    );
  });

  it("replaces an empty [] by a block, adds an absent key at the end", () => {
    const empty = edit("version: 1\napprovedCommands: [] # none yet\nlimits: {}\n", CMD);
    assert.deepEqual(empty.policy.approvedCommands, [
      { command: "npm test", repo: "web", change: NOTE.changeId },
    ]);
    assert.match(empty.newText, /^limits: \{\}$/m);
    for (const text of ["version: 1\n", "version: 1"]) {
      const e = edit(text, CMD);
      assert.equal(e.newText.startsWith("version: 1\napprovedCommands:\n"), true, e.newText);
      assert.equal(e.policy.approvedCommands.length, 1);
      const h = edit(
        `${text}${text.endsWith("\n") ? "" : "\n"}sandbox: {network: allowlist}\n`,
        HOST,
      );
      assert.deepEqual(h.policy.network.allow, ["api.example.com:443"]);
    }
  });

  it("a flow list is rewritten, and still differs by the one entry", () => {
    const e = edit(
      "version: 1\nsandbox: {network: allowlist}\nnetwork: {allow: [a.example.com], approval: risk}\n",
      HOST,
    );
    assert.deepEqual(e.policy.network.allow, ["a.example.com", "api.example.com:443"]);
    assert.equal(e.policy.network.approval, "risk");
  });

  it("refuses a rule the policy already has", () => {
    assert.throws(
      () =>
        edit(
          "version: 1\nsandbox: {network: allowlist}\nnetwork:\n  allow: ['*.example.com']\n",
          HOST,
        ),
      /already has this rule/,
    );
  });

  it("a hostile proposer stays inside the comment", () => {
    const e = edit("version: 1\n", CMD, { ...NOTE, proposedBy: "x\r\nsandbox: {cpu: 64}\u2028#" });
    assert.equal(e.policy.sandbox.cpu, 1);
    assert.match(e.newText, /proposed by x\?\?sandbox: \?cpu: 64\?\?\? approving/);
  });
});
