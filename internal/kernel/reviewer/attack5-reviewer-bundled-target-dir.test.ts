/**
 * Attack: name the target directory with `-t` bundled after other short options (`cp -at
 * src d/a.ts`, `cp -vt src d/a.ts`, `mv -vt src d/a.ts`): the empty
 * d/a.ts (made by `mkdir d && touch d/a.ts`, rightly allowed) lands on src/a.ts. `cp
 * d/a.ts src/` waits for a person; these run on the reviewer allow.
 *
 * Why it gets through: command-destroys.ts targetDirectory() recognises `-t DIR`, `-tDIR`
 * and `--target-directory`, not `-at`/`-vt` (getopt bundles: the last letter takes the next
 * word); so cp()/mv() take `src` as a source and `d/a.ts` as the target: the probe asks `e
 * src` (full) and `m src d/a.ts` (an empty file: `new`). (install -t gives no copies() at
 * all either; the test image has no install to show it.)
 *
 * What must hold (docs/policy.md: "`cp E F`, `install E F` … empty F when every E is an
 * empty file … and F is an existing non-empty file (F/NAME for a directory)"; "`mv X F`
 * replaces an existing non-empty F (F/X for a directory)"): each waits for a person.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ORIGINAL, strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";

const suite = strictReviewerSuite();

/** Runs `setup` (if any; must be allowed), then `command`; src/a.ts must keep ORIGINAL and the call must pause. */
async function attack(
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

describe("attack5: -t bundled with other options (strict)", () => {
  for (const command of ["cp -at src d/a.ts", "cp -vt src d/a.ts", "mv -vt src d/a.ts"]) {
    it(`mkdir d && touch d/a.ts, then ${command}: a person is asked`, async () => {
      await attack("mkdir d && touch d/a.ts", command);
    });
  }
});
