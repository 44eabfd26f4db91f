/**
 * False positive (Low): a recursive copy into an existing directory that creates only new
 * files asks a person, because the `r` probe asks only "does D hold an empty file and is T
 * a directory" — not whether any file would be replaced. `cp -r pkg out` (out exists:
 * writes out/pkg/__init__.py, new) and `cp -r . /tmp/bk` (a backup outside the workspace)
 * both pause when the tree holds an empty file (an `__init__.py`, a `.gitkeep`).
 *
 * What must hold (docs/policy.md: "Writing content … is ordinary"; the run's own files
 * outside the workspace are its own): these run without a person.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ORIGINAL, strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";

const suite = strictReviewerSuite();

/** Runs `setup` (if any; must be allowed), then `command`; src/a.ts must keep ORIGINAL and the call must pause. */
async function _attack(
  setup: string | undefined,
  command: string,
  watch = "src/a.ts",
  setupKeeps = true,
): Promise<void> {
  const { run, kernel } = await suite.freshRun();
  if (setup !== undefined) {
    const first = await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: setup },
    });
    assert.equal(first.kind, "result", `setup must run: ${JSON.stringify(first).slice(0, 200)}`);
    if (setupKeeps) assert.equal(await suite.content(run, "src/a.ts"), ORIGINAL);
  }
  const out = await kernel.handle(run, { callId: "c2", tool: "process.run", input: { command } });
  const ps = (await suite.log().read(run.runId, 0)).map((e) => e.event.payload);
  const v = ps.findLast((p) => p.case === "reviewerVerdict");
  const content = await suite.content(run, watch);
  assert.equal(
    out.kind,
    "paused",
    `must wait for a person; got ${JSON.stringify(out).slice(0, 200)} (reviewer: ${v?.case === "reviewerVerdict" ? `${v.value.verdict} ${v.value.note}` : "none"}); ${watch} now ${JSON.stringify(content)}`,
  );
  assert.equal(content, ORIGINAL);
}

describe("attack5: tree copies that replace nothing (strict)", () => {
  for (const [setup, command] of [
    ["mkdir -p pkg out && touch pkg/__init__.py", "cp -r pkg out"],
    ["mkdir /tmp/bk", "cp -r . /tmp/bk"],
  ]) {
    it(`${setup}, then ${command}: runs`, async () => {
      const { run, kernel } = await suite.freshRun();
      const first = await kernel.handle(run, {
        callId: "c1",
        tool: "process.run",
        input: { command: setup },
      });
      assert.equal(first.kind, "result");
      const out = await kernel.handle(run, {
        callId: "c2",
        tool: "process.run",
        input: { command },
      });
      assert.equal(
        out.kind,
        "result",
        `a copy that replaces nothing runs; got ${JSON.stringify(out).slice(0, 300)}`,
      );
      assert.equal(await suite.content(run, "src/a.ts"), ORIGINAL);
    });
  }
});
