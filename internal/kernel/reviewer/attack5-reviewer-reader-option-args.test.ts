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
import { describe, it } from "node:test";
import { strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";

const suite = strictReviewerSuite();

const attack = (setup: string | undefined, command: string, watch?: string, setupKeeps?: boolean) =>
  suite.assertAsked(command, {
    setup,
    ...(watch === undefined ? {} : { watch }),
    ...(setupKeeps === undefined ? {} : { setupKeeps }),
  });

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
