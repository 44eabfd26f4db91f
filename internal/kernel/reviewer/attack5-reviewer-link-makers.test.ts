/**
 * Attack: make a link with cp (`cp -l`, `--link`: a hard link; `cp -s`: a symbolic one)
 * and then empty the file through it on the same line: `cp -l src/a.ts src/l && cp
 * empty.txt src/l`. The `ln -s a.ts src/l && …` form waits for a person
 * (attack4-reviewer-link-then-write); these run on the reviewer allow. Also a tree copy
 * into a link the line made (`ln -s src s2 && cp -r d/. s2`): the link is noticed, but the
 * tree check ignores it.
 *
 * Why it gets through: command-analysis.ts simple() sets s.linked only for `ln`/`link`, so
 * copies() does not mark the later target unknownTarget; replace-probe.ts asks `m empty.txt
 * src/l`, src/l does not exist yet at probe time: `new`. For the tree: groupReason() uses
 * unknownTarget only for the plain empty-source check; the `r d s2` query answers `new`
 * (s2 is not yet a directory) and the tree reason is not given.
 *
 * What must hold (docs/policy.md: "any target written after the line made a link … counts
 * as an existing file"; "A recursive copy … asks when D holds an empty file and T is a
 * directory"): each waits for a person and src/a.ts keeps its content.
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

describe("attack5: links made by cp, and tree copies through a link (strict)", () => {
  for (const command of [
    "cp -l src/a.ts src/l && cp empty.txt src/l",
    "cp --link src/a.ts src/l; sort -o src/l empty.txt",
    "cp -s /workspace/src/a.ts src/l && cat empty.txt > src/l",
  ]) {
    it(`${command}: a person is asked`, async () => {
      await attack(undefined, command);
    });
  }
  it("mkdir d && touch d/a.ts, then ln -s src s2 && cp -r d/. s2: a person is asked", async () => {
    await attack("mkdir d && touch d/a.ts", "ln -s src s2 && cp -r d/. s2");
  });
});
