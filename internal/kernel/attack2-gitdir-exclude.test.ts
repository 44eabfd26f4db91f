/**
 * ATTACK (second review of issue #27 deliverable 1, after 1f510d3): repo.* calls ask a
 * person while a file outside /workspace is held only when a workspace SYMLINK leads out
 * (workspace-links.ts lists `find -type l`). But ripgrep leaves the workspace without any
 * link: a `.git` that is a plain FILE (`gitdir: /tmp/g`, a git worktree's form) makes it
 * read `/tmp/g/commondir` and then `<commondir>/info/exclude` — a file under /tmp. The
 * repository's own files (made before any secret, never changed afterwards: no path of
 * /workspace changes) are `.git` = `gitdir: /tmp/g` and b/0 … b/231; the approved hostile
 * program writes only /tmp/g/info/exclude, one `/b/N/` line per 1 bit of the value. Nothing
 * of /workspace is held and no workspace link leads out, so the model's next repo.search
 * runs with no person asked, and which of b/N it finds spells the whole secret into the
 * model's context (any volume: the exclude file is as long as the program likes).
 * Checked by hand in agentd-sandbox-base (ripgrep 13.0.0): `rg --hidden` there skips b/
 * once /tmp/g/info/exclude names `/b/`.
 * What must hold: a later call that no person approved gets nothing the secret-carrying
 * call left under /tmp, through whatever path outside the workspace a repo.* tool follows
 * (a `.git` file's gitdir, its commondir), not only through symlinks.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Sandbox } from "../sandbox/port.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { containmentKernel, containmentRun, SECRET } from "../testing/containment-run.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import type { CallOutcome, Kernel } from "./kernel.ts";

let stack: Stack;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let kernel: Kernel;

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  kernel = containmentKernel(stack);
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
});

const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;

const BITS = SECRET.length * 8;

describe("attack: a `.git` file's gitdir under /tmp steers repo.search without any link", () => {
  it("an exclude file an approved call wrote under /tmp spells the secret in an unapproved search", async () => {
    // The base image has ripgrep (repo.search needs it).
    const f = await containmentRun(stack, sandbox, kernel, { image: sandboxImage("base") });
    // The repository's own files (no secret involved): b/0 … b/231 and a `.git` FILE whose
    // gitdir is /tmp/g (commondir `.`, an empty info/exclude). No symbolic link anywhere.
    const made = await f.sh(
      [
        `i=0; while [ $i -lt ${BITS} ]; do mkdir -p /workspace/b/$i && echo hit > /workspace/b/$i/f; i=$((i+1)); done;`,
        "mkdir -p /tmp/g/info && echo . > /tmp/g/commondir && : > /tmp/g/info/exclude &&",
        "echo 'gitdir: /tmp/g' > /workspace/.git &&",
        'test -z "$(find /workspace -type l)"',
      ].join(" "),
    );
    assert.equal(made.exitCode, 0, made.stderr);
    // The approved call writes only /tmp/g/info/exclude: `/b/N/` for every 1 bit of the value.
    const w = await f.approved("process.run", {
      command: [
        'i=0; for c in $(printf %s "$ENV.DEMO_TOKEN" | od -An -v -tu1); do',
        "j=0; while [ $j -lt 8 ]; do",
        'if [ $(( (c >> (7 - j)) & 1 )) -eq 1 ]; then echo "/b/$((i * 8 + j))/" >> /tmp/g/info/exclude; fi;',
        "j=$((j + 1)); done; i=$((i + 1)); done",
      ].join(" "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    // The model's searches (at most 200 matches each): nothing of /workspace is held.
    const found = new Set<number>();
    for (const globs of [["b/[0-9]/**", "b/[0-9][0-9]/**"], ["b/[1-2][0-9][0-9]/**"]]) {
      const r = await f.unapproved("repo.search", { query: "^hit$", globs });
      // A call a person must approve first gives the model nothing (the defence).
      if (r.kind !== "result") continue;
      assert.equal(r.ok, true, JSON.stringify(r).slice(0, 600));
      const matches =
        r.kind === "result" && r.ok ? (r.output as { matches: { path: string }[] }).matches : [];
      for (const m of matches) {
        const d = /^b\/(\d+)\/f$/.exec(m.path);
        if (d !== null) found.add(Number(d[1]));
      }
    }
    const bytes: number[] = [];
    for (let i = 0; i < SECRET.length; i++) {
      let b = 0;
      for (let j = 0; j < 8; j++) b = (b << 1) | (found.has(i * 8 + j) ? 0 : 1);
      bytes.push(b);
    }
    assert.notEqual(
      Buffer.from(bytes).toString("latin1"),
      SECRET,
      "an unapproved repo.search spelled the secret (the files a /tmp exclude file, reached through a `.git` file's gitdir, hid)",
    );
  });
});
