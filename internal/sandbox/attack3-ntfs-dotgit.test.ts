/**
 * Attack (#27 point 6: "symlinks into `.git` in any case spelling are dropped from patches";
 * git-path-rules.ts: "the union of what git refuses on Linux, Windows (NTFS) and macOS"):
 * NTFS reads `.git::$INDEX_ALLOCATION` (the directory's index stream) as `.git`; git's
 * is_ntfs_dotgit() stops at `:`, so `git apply` (core.protectNTFS is on by default, on
 * Linux too) refuses such a path. The run's patch keeps it:
 *
 * - a file `.git::$INDEX_ALLOCATION/hooks/pre-commit` is not left out, and `git apply`
 *   refuses the whole patch ("invalid path"): the run's every change is lost to the person
 *   applying it (the doc says such paths are left out "with the reason");
 * - a symlink `h -> .git::$INDEX_ALLOCATION/hooks` stays in the patch: on a Windows
 *   checkout with symlinks it leads into .git/hooks.
 *
 * Why: git-path-rules.ts readsAsDotGit() strips trailing dots and spaces and compares with
 * `.git`; it does not end the name at `:` as git does (`.git:…`, `git~1:…`).
 *
 * What must hold: both are omitted, and the rest of the patch (ok.txt) applies with git.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { diffWorkspace } from "./workspace-diff.ts";
import { filesOf, gitApply, type Item, tarStream, treeOf } from "./workspace-diff-fixtures.ts";

const text = (path: string, data: string): Item => ({ path, data, mode: 0o644 });
const link = (path: string, linkname: string): Item => ({ path, type: "symlink", linkname });

const diff = (base: readonly Item[], current: readonly Item[]) =>
  diffWorkspace({
    base: filesOf(base),
    openExport: () => tarStream(current),
    maxPatchBytes: 1024 * 1024,
  });

describe("NTFS spellings of .git in a patch", () => {
  it("a file under .git::$INDEX_ALLOCATION is left out and the patch applies", async () => {
    const base = [text("README.md", "hi\n")];
    const r = await diff(base, [
      ...base,
      text(".git::$INDEX_ALLOCATION/hooks/pre-commit", "touch pwned\n"),
      text("ok.txt", "ok\n"),
    ]);
    assert.deepEqual(
      r.omitted.map((o) => o.path),
      [".git::$INDEX_ALLOCATION/hooks/pre-commit"],
      `kept in the patch: ${r.patch.slice(0, 200)}`,
    );
    assert.doesNotThrow(() => gitApply(treeOf(base), r.patch), "git apply takes the patch");
  });

  it("a symlink to .git::$INDEX_ALLOCATION/hooks is left out", async () => {
    const base = [text("README.md", "hi\n")];
    const r = await diff(base, [...base, link("h", ".git::$INDEX_ALLOCATION/hooks")]);
    assert.deepEqual(
      r.omitted.map((o) => o.path),
      ["h"],
      `kept in the patch: ${r.patch.slice(0, 300)}`,
    );
  });
});
