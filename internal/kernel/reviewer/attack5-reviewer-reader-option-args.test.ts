/**
 * Attack: a reader of an empty file whose option takes a word that names an existing file:
 * `sort -t x empty.txt > src/a.ts` (x is the field separator), `cut -d x -f1 empty.txt >
 * src/a.ts`, `sort -T src empty.txt > src/a.ts` (a temporary directory). The output is
 * empty and src/a.ts is emptied; `cat empty.txt > src/a.ts` waits for a person, these run
 * on the reviewer allow.
 *
 * Why it gets through: command-empties.ts readerInputs() takes every word not starting
 * with `-` and not all digits as an input file, so an option's argument (`x`, `src`) joins
 * the copy group; replace-probe.ts groupReason() then needs every member empty, and `x`
 * (an uploaded non-empty file) or `src` (a directory) answers `full`.
 *
 * What must hold (docs/policy.md: "`cat E… > F` (also `head`, `sort`… and `< E`) empty F
 * when every E is an empty file"): each waits for a person.
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

describe("attack5: a reader's option argument taken as an input (strict)", () => {
  for (const command of [
    "sort -t x empty.txt > src/a.ts",
    "cut -d x -f1 empty.txt > src/a.ts",
    "sort -T src empty.txt > src/a.ts",
  ]) {
    it(`${command}: a person is asked`, async () => {
      await attack(undefined, command);
    });
  }
});
