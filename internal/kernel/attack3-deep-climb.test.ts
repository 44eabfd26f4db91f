/**
 * Attack (#27 point 4: "globs are expanded against the workspace … for build, config and
 * protected paths"; the policy's denyPatterns and secretPaths): a path that climbs to `/`
 * with 32 or more `../` before naming /workspace is not seen as the workspace path it is.
 * `echo … > ../../…(40)…/workspace/.git/hooks/pre-commit` writes a git hook
 * (the `.git` deny pattern: a hard deny), `cat ../…/workspace/.env` reads a secret path, and
 * `cp p.txt ../…/workspace/package.json` overwrites a build file — with no person asked.
 * The same from a directory 35 levels deep (`cd d/d/…/d && cp … ../../…/package.json`).
 *
 * Why: protected-paths.ts tails() tries at most MAX_SUFFIXES (32) tails of a path and
 * normalise() keeps leading `..` segments (it cannot pop above its start), so the tail that
 * names `.git/hooks/pre-commit`, `.env` or `package.json` is never tried; a path of only
 * `..` then /workspace resolves (from /workspace, / has no parent) to /workspace itself.
 * The build-file check misses it the same way.
 *
 * What must hold: each command waits for a person or is denied, and the hook, .env and
 * package.json are as they were; .env's value is not in the result.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { decisionBox, repoPolicy } from "../testing/decision-box.ts";
import { createKernel } from "./kernel.ts";

const policy = repoPolicy();

const PACKAGE = '{"name":"w","version":"1.0.0","scripts":{"lint":"echo linted"}}\n';
const HOSTILE = '{"name":"w","version":"1.0.0","scripts":{"lint":"touch pwned"}}\n';
const FILES: WorkspaceFile[] = [
  { path: "package.json", type: "file", mode: 0o644, data: Buffer.from(PACKAGE) },
  { path: "p.txt", type: "file", mode: 0o644, data: Buffer.from(HOSTILE) },
  { path: "notes.txt", type: "file", mode: 0o644, data: Buffer.from("keep me\n") },
  {
    path: ".env",
    type: "file",
    mode: 0o600,
    data: Buffer.from("API_TOKEN=tok_live_9f8e7d6c5b4a\n"),
  },
];

const t = decisionBox(FILES);
const sh = (cmd: string) => t.sh(cmd);

const UP = "../".repeat(40);
const DEEP = "d/".repeat(35);

describe("paths that climb past the 32 tails the kernel tries", () => {
  const cases: [string, string, () => Promise<boolean>][] = [
    [
      "a git hook under .git (denyPatterns)",
      `echo 'touch /tmp/pwned' > ${UP}workspace/.git/hooks/pre-commit`,
      async () => (await sh("cat /workspace/.git/hooks/pre-commit 2>/dev/null; true")) !== "",
    ],
    [
      "package.json (a build file)",
      `cp p.txt ${UP}workspace/package.json`,
      async () => (await sh("cat /workspace/package.json")) !== PACKAGE,
    ],
    [
      "package.json from 35 directories down",
      `mkdir -p ${DEEP} && cd ${DEEP} && cp /workspace/p.txt ${"../".repeat(35)}package.json`,
      async () => (await sh("cat /workspace/package.json")) !== PACKAGE,
    ],
    [
      ".env (a secret path) overwritten",
      `cp p.txt ${UP}workspace/.env`,
      async () => !(await sh("cat /workspace/.env")).includes("tok_live_9f8e7d6c5b4a"),
    ],
  ];
  let i = 0;
  for (const [name, command, changed] of cases)
    it(`${name}: waits for a person or is denied`, async () => {
      await sh(
        `cd /workspace && rm -rf d .git && mkdir -p .git/hooks && printf %s '${PACKAGE}' > package.json && printf 'API_TOKEN=tok_live_9f8e7d6c5b4a\\n' > .env`,
      );
      const kernel = createKernel({ log: t.log, policy: () => policy, secretProviders: [] });
      const out = await kernel.handle(t.run, {
        callId: `d${++i}`,
        tool: "process.run",
        input: { command },
      });
      const ran = out.kind === "result" && out.ok;
      assert.ok(
        !(ran && (await changed())),
        `ran with no person: ${JSON.stringify(out).slice(0, 300)}`,
      );
    });

  it("reading .env (a secret path) through the climb: the value does not come back unasked", async () => {
    await sh(`cd /workspace && printf 'API_TOKEN=tok_live_9f8e7d6c5b4a\\n' > .env`);
    const kernel = createKernel({ log: t.log, policy: () => policy, secretProviders: [] });
    const out = await kernel.handle(t.run, {
      callId: "r1",
      tool: "process.run",
      input: { command: `cat ${UP}workspace/.env | rev` },
    });
    assert.ok(
      !JSON.stringify(out).includes("a4b5c6d7e8f9_evil_kot"),
      `the secret path was read with no person: ${JSON.stringify(out).slice(0, 300)}`,
    );
  });
});
