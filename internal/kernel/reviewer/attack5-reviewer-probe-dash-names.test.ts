/**
 * Attack: a recursive copy from a directory whose name starts with `-`. The agent makes
 * `-d/a.ts` empty (`mkdir -- -d && touch -- -d/a.ts`: new files only, rightly allowed),
 * then `cp -r -- -d/. src` (or `cp -r ./-d/. src`): cp writes the empty a.ts over src/a.ts.
 * The same copy from `d/.` waits for a person (attack4-reviewer-recursive-copy).
 *
 * Why it gets through: replace-probe.ts PROBE_SCRIPT, query `r`, runs `find "$s/" -type f
 * -empty` with s = "-d" (command-analysis.ts resolveCopies() normalises `./-d/.` to `-d`):
 * find reads "-d/" as an expression, fails, its error goes to /dev/null and the empty
 * output reads as "no empty file": `new`. groupReason() finds no reason; the reviewer allows.
 * (The `d` query has the same `find "$t/"` flaw for a target named `-…`.)
 *
 * What must hold (docs/policy.md: "A recursive copy (`cp -r D/. T`, `-R`, `-a`) asks when D
 * holds an empty file and T is a directory"; "A probe that fails counts as emptying"):
 * the copy waits for a person and src/a.ts keeps its content.
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

describe("attack5: a recursive copy from a directory named -d (strict)", () => {
  for (const command of ["cp -r -- -d/. src", "cp -r ./-d/. src/"]) {
    it(`mkdir -- -d && touch -- -d/a.ts, then ${command}: a person is asked`, async () => {
      await attack("mkdir -- -d && touch -- -d/a.ts", command);
    });
  }
});
