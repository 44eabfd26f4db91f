/**
 * Attack (#27 point 6: "symlinks into `.git` in any case spelling are dropped from
 * patches"; symlink-confinement.ts: links that "lead into `.git` in any spelling a file
 * system would read as it" and links that lead out — "absolute, above the root" — are left
 * out; git-path-rules.ts: the check is "the union of what git refuses on Linux, Windows
 * (NTFS) and macOS (HFS+), as a patch may be applied on any of them"):
 *
 * - a symlink `h -> .git\hooks`: Git for Windows makes a link's target a Windows path
 *   (compat/mingw.c mingw_symlink turns `/` into `\` and keeps every `\`), so NTFS reads
 *   the target as `.git` then `hooks`: the link leads into the repository's metadata;
 * - a symlink `up -> ..\..\..\Users` leads above the root there, and `abs -> C:\Windows`
 *   (or `\\host\share`) is absolute there;
 * - a file `a\b.txt`: git on Windows refuses any path holding `\` (read-cache.c
 *   verify_path, core.protectNTFS), so `git apply` refuses the whole patch there.
 *
 * Why they get through: symlink-confinement.ts resolveLink() splits a target on `/` only
 * and tests each component with readsAsDotGit(), so `.git\hooks` is one harmless-looking
 * name, `C:\Windows` a relative one; git-path-rules.ts gitRefusal() never looks for `\`.
 *
 * What must hold: each of them is left out of the patch (with its reason), the rest kept.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { diffWorkspace } from "./workspace-diff.ts";
import { filesOf, type Item, tarStream } from "./workspace-diff-fixtures.ts";

const text = (path: string, data: string): Item => ({ path, data, mode: 0o644 });
const link = (path: string, linkname: string): Item => ({ path, type: "symlink", linkname });

const diff = (base: readonly Item[], current: readonly Item[]) =>
  diffWorkspace({
    base: filesOf(base),
    openExport: () => tarStream(current),
    maxPatchBytes: 1024 * 1024,
  });

const base = [text("README.md", "hi\n")];

describe("Windows spellings in a patch's links and names", () => {
  for (const [name, target] of [
    ["h", ".git\\hooks"],
    ["H", ".GIT\\hooks"],
    ["up", "..\\..\\..\\Users"],
    ["abs", "C:\\Windows"],
    ["unc", "\\\\host\\share"],
  ] as const) {
    it(`a symlink ${name} -> ${target} is left out`, async () => {
      const r = await diff(base, [...base, link(name, target), text("ok.txt", "ok\n")]);
      assert.deepEqual(
        r.omitted.map((o) => o.path),
        [name],
        `kept in the patch: ${r.patch.slice(0, 300)}`,
      );
      assert.match(r.patch, /ok\.txt/, "the rest is kept");
    });
  }

  it("a file whose name holds a backslash is left out (git on Windows refuses the path)", async () => {
    const r = await diff(base, [...base, text("a\\b.txt", "x\n"), text("ok.txt", "ok\n")]);
    assert.deepEqual(
      r.omitted.map((o) => o.path),
      ["a\\b.txt"],
      `kept in the patch: ${r.patch.slice(0, 300)}`,
    );
  });
});
