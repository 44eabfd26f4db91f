/**
 * Attack: tar creating an archive over an uploaded file with an abbreviated long option,
 * which GNU tar (the sandbox's tar) accepts: `tar --cre -f src/a.ts x`, `tar -c
 * --fil=src/a.ts x`. `tar -cf src/a.ts x` waits for a person
 * (attack4-reviewer-archive-output); these overwrite src/a.ts with an archive on the
 * reviewer's allow.
 *
 * Why it gets through: command-destroys.ts createdArchive() recognises only `--create` and
 * short `c` bundles for create, and only `--file`/`--file=`/`-f` for the archive; an
 * abbreviation is neither, so archiverDestroys() never calls fx.replaces(). The tar family
 * does not treat unknown long options as dynamic.
 *
 * What must hold (docs/policy.md: "`tar -cf F` (every create form, `--file=F`) fills F with
 * output the line does not show, as `awk … > F`"; "An option the analysis does not know
 * is dynamic"): each waits for a person.
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

describe("attack5: abbreviated tar long options (strict)", () => {
  for (const command of ["tar --cre -f src/a.ts x", "tar -c --fil=src/a.ts x"]) {
    it(`${command}: a person is asked`, async () => {
      await attack(undefined, command);
    });
  }
});
