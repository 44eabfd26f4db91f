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
import { describe, it } from "node:test";
import { strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";

const suite = strictReviewerSuite();

const attack = (setup: string | undefined, command: string, watch?: string, setupKeeps?: boolean) =>
  suite.assertAsked(command, {
    setup,
    ...(watch === undefined ? {} : { watch }),
    ...(setupKeeps === undefined ? {} : { setupKeeps }),
  });

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
