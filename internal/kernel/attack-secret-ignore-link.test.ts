/**
 * ATTACK (review of issue #27 deliverable 1, "Containment by mechanism"): repo.* calls
 * ask a person only while a WORKSPACE file is held (secret-containment.ts `readable`:
 * "repo.* reach the workspace only"). But repo.search runs ripgrep in the sandbox, and
 * ripgrep reads `.ignore` files — following a symlink. A repository whose `.ignore` is a
 * link into /tmp (`.ignore → /tmp/ign`, made before any secret, never changed: no path of
 * /workspace changes) lets an approved hostile program that writes only under /tmp decide
 * what every later repo.search sees: it lists `b/N/` in /tmp/ign for every 1 bit of the
 * value. Nothing of /workspace is held, so the model's next repo.search runs with no person
 * asked, and which of b/0 … b/231 it finds spells the whole secret into the model's
 * context (any volume: the ignore file can be as long as the program likes).
 * Second case (a later review): the links' targets are lexically inside but physically
 * outside — `s → .` and `.ignore → s/../tmp/ign` (after the link s, `..` climbs from
 * /workspace to /), which a lexical check of each target passed. Third case: no link at all,
 * a `.git` FILE naming a gitdir under /tmp, whose info/exclude ripgrep read.
 * What must hold: a later call that no person approved gets nothing the secret-carrying
 * call left under /tmp (held there), through links of the workspace or otherwise.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  forEachOneBit,
  MAKE_BIT_DIRS,
  searchedBits,
  spelledByHidden,
} from "../testing/bit-channel.ts";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { sandboxImage } from "../testing/docker.ts";

const suite = containmentSuite();

/**
 * The repository's own set-up (made before any secret, never changed) and the file under
 * /tmp through which it steers ripgrep.
 */
const CASES: Record<string, { setup: string; file: string }> = {
  "a link straight into /tmp": {
    setup: ": > /tmp/ign && ln -s /tmp/ign /workspace/.ignore",
    file: "/tmp/ign",
  },
  "links lexically inside, physically outside (s → ., .ignore → s/../tmp/ign)": {
    setup: ": > /tmp/ign && ln -s . /workspace/s && ln -s s/../tmp/ign /workspace/.ignore",
    file: "/tmp/ign",
  },
  // Third case (a later review): no link at all. A `.git` that is a plain FILE
  // (`gitdir: /tmp/g`, a git worktree's form) makes ripgrep read /tmp/g/commondir and then
  // <commondir>/info/exclude; repo.search now passes --no-ignore-exclude.
  "a `.git` file whose gitdir is under /tmp (its info/exclude)": {
    setup: [
      "mkdir -p /tmp/g/info && echo . > /tmp/g/commondir && : > /tmp/g/info/exclude &&",
      "echo 'gitdir: /tmp/g' > /workspace/.git",
    ].join(" "),
    file: "/tmp/g/info/exclude",
  },
};

describe("attack: what the repository leaves outside the workspace steers repo.search", () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: what an approved call wrote under /tmp spells the secret in an unapproved search`, async () => {
      await spellsThroughIgnore(c.setup, c.file);
    });
  }
});

async function spellsThroughIgnore(setup: string, file: string): Promise<void> {
  // The base image has ripgrep (repo.search needs it).
  const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel, {
    image: sandboxImage("base"),
  });
  // The repository's own files (no secret involved): b/0 … b/231 and the set-up.
  const made = await f.sh(`${MAKE_BIT_DIRS} ${setup}`);
  assert.equal(made.exitCode, 0, made.stderr);
  // The approved call writes only `file`: `/b/N/` for every 1 bit of the value.
  const w = await f.approved("process.run", {
    command: forEachOneBit(`echo "/b/$n/" >> ${file}`),
  });
  assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
  // The model's searches: nothing of /workspace is held.
  assert.notEqual(
    spelledByHidden(await searchedBits(f)),
    SECRET,
    `an unapproved repo.search spelled the secret (the files ${file}, written by the approved call, hid)`,
  );
}
