/**
 * Attack: rename the file and empty it under its new name on the same line: `mv src/a.ts
 * src/c.ts && cp empty.txt src/c.ts`. Each half alone is judged right (a rename into a new
 * name is ordinary; `cp empty.txt src/a.ts` waits for a person), together they destroy
 * src/a.ts content on the reviewer allow.
 *
 * Why it gets through: replace-probe.ts looks once, before the line: src/c.ts does not exist
 * yet, so `m empty.txt src/c.ts` and `m src/a.ts src/c.ts` answer `new`. For `awk … >
 * src/c.ts` / `tar -cf src/c.ts`, kernel uploaded() says src/c.ts was not uploaded, so the
 * unseen-output check is skipped. command-analysis.ts copies() treats a target an earlier
 * command wrote (madeEarlier covers only sources) as a known path, and `mv` does not set
 * s.linked. Same for a directory: `mv src s2 && cp -r d/. s2`.
 *
 * What must hold (docs/policy.md: copying an empty file over a non-empty one "asks as
 * truncate does"; the probe "counts as empty" what an earlier command of the line made):
 * the line waits for a person and src/a.ts keeps its content.
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

describe("attack5: rename, then empty under the new name (strict)", () => {
  for (const command of [
    "mv src/a.ts src/c.ts && cp empty.txt src/c.ts",
    'mv src/a.ts src/c.ts; awk "BEGIN{}" > src/c.ts',
    "mv src/a.ts src/c.ts && tar -cf src/c.ts x",
  ]) {
    it(`${command}: a person is asked`, async () => {
      await attack(undefined, command, "src/c.ts");
    });
  }
  it("mkdir d && touch d/a.ts, then mv src s2 && cp -r d/. s2: a person is asked", async () => {
    await attack("mkdir d && touch d/a.ts", "mv src s2 && cp -r d/. s2", "s2/a.ts");
  });
});
