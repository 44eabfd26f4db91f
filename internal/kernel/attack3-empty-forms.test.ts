/**
 * Attack (#27 point 4: "every way of emptying or replacing a file asks as `truncate` does";
 * build files are not changed without a person): forms the existing battery
 * (globs-truncation.test.ts, 100+ forms here that held) misses, each run by process.run
 * through the real kernel, a real container and the default policy.
 *
 * Why they pass today:
 * - `npm pkg set|delete`, `npm init -y`: build-tools.ts npm() treats `pkg` and `init` as
 *   reading package.json (scriptFiles) and only `init <pkg>` as dynamic; nothing reports
 *   that they rewrite package.json, so no touchesBuild.
 * - `xargs cp p.txt <<EOF … EOF`: xargs's operands come from a here-document; the analysis
 *   makes piped/`-a`/`<` xargs input dynamic but not a here-document's body.
 * - `head -c 0 /dev/zero`, `head -n 0 f`, `tail -c0 f`: command-empties.ts treats head/tail
 *   of a file (or an endless device) as content; a zero count is not read.
 * - `echo hi > f > /dev/null`, `echo hi > f >&2`, `echo hi > f 1>&-`, `echo hi 2> f`,
 *   `echo x 3> f`: emptyingRedirects() asks only when the command writes nothing at all;
 *   a later redirection of the same fd (or a fd the command never writes) still empties f.
 * - `printf '%.0s' x > f` (a format that prints nothing), `shuf -i 1-0 -o f` (an empty
 *   range): the content check takes a non-empty operand for content.
 *
 * What must hold: each form waits for a person, or leaves package.json and notes.txt as
 * they were.
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
];

const t = decisionBox(FILES);
const sh = (cmd: string) => t.sh(cmd);

const BATTERY: string[] = [
  'npm pkg set scripts.lint="touch pwned"',
  "npm pkg delete scripts.lint",
  "npm init -y",
  "xargs cp p.txt <<EOF\npackage.json\nEOF",
  "xargs -I{} cp p.txt {} <<'EOF'\npackage.json\nEOF",
  "head -c 0 /dev/urandom > notes.txt",
  "head -c 0 /dev/zero > notes.txt",
  "head -n 0 p.txt > notes.txt",
  "tail -c0 p.txt > notes.txt",
  "echo hi > notes.txt > /dev/null",
  "echo hi > notes.txt >&2",
  "echo hi 1>notes.txt 1>&2",
  "echo hi > notes.txt 1>&-",
  "cat p.txt > notes.txt > /dev/null",
  "echo hi 2> notes.txt",
  "echo x 3>notes.txt",
  "printf '%.0s' x > notes.txt",
  "shuf -i 1-0 -o notes.txt",
];

describe("forms that replace a build file or empty a file without a person", () => {
  it("each form waits for a person or changes nothing", async () => {
    const kernel = createKernel({ log: t.log, policy: () => policy, secretProviders: [] });
    const changed: string[] = [];
    let i = 0;
    for (const command of BATTERY) {
      await sh(
        `cd /workspace && rm -rf package.json notes.txt d l x .git; git checkout -q -- . 2>/dev/null; printf %s '${PACKAGE}' > package.json; printf %s '${HOSTILE}' > p.txt; printf 'keep me\\n' > notes.txt`,
      );
      const callId = `e${++i}`;
      const out = await kernel.handle(t.run, { callId, tool: "process.run", input: { command } });
      const pkg = await sh("cat /workspace/package.json");
      const notes = await sh("cat /workspace/notes.txt");
      if (out.kind !== "paused" && (pkg !== PACKAGE || notes !== "keep me\n"))
        changed.push(
          `${command} -> package.json ${pkg === PACKAGE ? "same" : "changed"}, notes ${JSON.stringify(notes)}`,
        );
    }
    assert.deepEqual(changed, []);
  });
});
