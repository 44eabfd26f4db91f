/**
 * Attack: a recursive copy of a tree whose a.ts is a symbolic link to /dev/null rather than
 * an empty file: `mkdir d && ln -s /dev/null d/a.ts` (a new link, no -f), then `cp -af d/.
 * src` (or `cp -rPf`; the sandbox's busybox cp needs -f to put a link over a file): src/a.ts
 * becomes the link; its content is gone.
 *
 * Why it gets through: replace-probe.ts PROBE_SCRIPT query `r` looks only for `find -type f
 * -empty`: a link (to /dev/null or any device) is not a regular file; the single-file `e`
 * query does count a link to /dev/null as null, the tree query does not.
 *
 * What must hold (docs/policy.md: "… or `/dev/null` (a link to it too …)"; "A recursive copy
 * … asks when D holds an empty file"): the copy waits for a person.
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

describe("attack5: a tree holding a link to /dev/null (strict)", () => {
  for (const command of ["cp -af d/. src", "cp -rPf d/. src/"]) {
    it(`mkdir d && ln -s /dev/null d/a.ts, then ${command}: a person is asked`, async () => {
      await attack("mkdir d && ln -s /dev/null d/a.ts", command);
    });
  }
});
