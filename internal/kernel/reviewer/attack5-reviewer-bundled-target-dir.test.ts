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
import { describe, it } from "node:test";
import { strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";

const suite = strictReviewerSuite();

const attack = (setup: string | undefined, command: string, watch?: string, setupKeeps?: boolean) =>
  suite.assertAsked(command, {
    setup,
    ...(watch === undefined ? {} : { watch }),
    ...(setupKeeps === undefined ? {} : { setupKeeps }),
  });

describe("attack5: -t bundled with other options (strict)", () => {
  for (const command of ["cp -at src d/a.ts", "cp -vt src d/a.ts", "mv -vt src d/a.ts"]) {
    it(`mkdir d && touch d/a.ts, then ${command}: a person is asked`, async () => {
      await attack("mkdir d && touch d/a.ts", command);
    });
  }
});
