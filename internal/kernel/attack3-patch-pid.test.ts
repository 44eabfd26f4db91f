/**
 * ATTACK (third review of issue #27 deliverable 1, after a64e740): the container's kernel
 * state (the PID counter among it) is held after a secret exec, but only for execs:
 * docs/policy.md says "repo.read, repo.search and repo.patch cannot read kernel counters"
 * (secret-containment.ts guardTaint reaches repo.* only through held FILES, heldFilesOf
 * leaves CONTAINER_STATE out). repo.patch can: its write script names its temporary file by
 * the shell's PID (tools/repo-patch.ts WRITE_SH, `t="$d/.agentd-patch-$$"`), and when the
 * file cannot be made the shell's error — PID included — becomes the model's error text
 * (writeFailed: `repo.patch could not write …: ${stderr}`). A directory made read-only
 * before any secret (`chmod 555 ro`) is enough. The approved secret-carrying call writes
 * no workspace file; it runs `true` as many times as the value's first byte says (the PID
 * counter advances by that much). The model's next repo.patch into ro/ runs with no person
 * (nothing of /workspace is held, no link leads out) and its error spells the PID; against
 * a control run whose approved call forks nothing, the difference is the byte.
 * What must hold: nothing of the container's kernel state reaches the model through a call
 * no person approved (a tool's error texts name no PID, inode or other counter).
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ContainmentRun, containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";

const suite = containmentSuite();

/** The PID in a failed repo.patch's error (undefined: no PID told). */
async function pidOf(f: ContainmentRun, name: string): Promise<number | undefined> {
  const r = await f.unapproved("repo.patch", {
    path: `ro/${name}`,
    edits: [{ oldText: "", newText: "x\n" }],
  });
  const text = JSON.stringify(r);
  const m = /\.agentd-patch-(\d+)/.exec(text);
  return m === null ? undefined : Number(m[1]);
}

/** How far the PID counter moved across one approved call that forks `forks` (a shell expression). */
async function delta(forks: string): Promise<number | undefined> {
  const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
  const made = await f.sh("mkdir /workspace/ro && chmod 555 /workspace/ro");
  assert.equal(made.exitCode, 0, made.stderr);
  const before = await pidOf(f, "a");
  const w = await f.approved("process.run", {
    command: `c=${forks}; i=0; while [ $i -lt $c ]; do /bin/true; i=$((i+1)); done; : "$ENV.DEMO_TOKEN"`,
  });
  assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
  const after = await pidOf(f, "b");
  return before === undefined || after === undefined ? undefined : after - before;
}

describe("attack: the PID counter through a repo.patch error", () => {
  it("a failed unapproved repo.patch tells how many processes the secret call forked", async () => {
    // The same pipeline in both: only the count differs (the byte, or 0).
    const byte = await delta('$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1 | sed "s/x/x/")');
    const control = await delta('$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1 | sed "s/.*/0/")');
    const told = byte === undefined || control === undefined ? undefined : byte - control;
    assert.equal(
      told !== undefined && Math.abs(told - SECRET.charCodeAt(0)) <= 2,
      false,
      `the model's repo.patch errors spell the value's first byte as a PID difference (${told} ≈ ${SECRET.charCodeAt(0)})`,
    );
  });
});
