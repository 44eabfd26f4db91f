/**
 * The gitignore rules against the real git: the same tree of untracked files and hostile
 * `.gitignore` files (nested, negations, directory-only, `**`, escapes, odd directory names)
 * is asked of `git ls-files --others --exclude-standard` and of createGitignoreRules.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { createGitignoreRules, rootRelativePattern } from "./gitignore-rules.ts";

/** The paths git ignores among `files` (all untracked), with `gitignores` in place. */
function gitIgnored(files: readonly string[], gitignores: ReadonlyMap<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), "agentd-gitignore-"));
  try {
    execFileSync("git", ["init", "-q"], { cwd: dir });
    const write = (p: string, data: string) => {
      mkdirSync(dirname(join(dir, p)), { recursive: true });
      writeFileSync(join(dir, p), data);
    };
    for (const f of files) write(f, "x");
    for (const [d, text] of gitignores) write(d === "" ? ".gitignore" : `${d}/.gitignore`, text);
    const ls = (...extra: string[]) =>
      execFileSync("git", ["ls-files", "-z", "--others", ...extra], {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
      })
        .split("\0")
        .filter((p) => p !== "");
    const visible = new Set(ls("--exclude-standard"));
    return ls().filter((p) => !visible.has(p));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function ours(files: readonly string[], gitignores: ReadonlyMap<string, string>): string[] {
  const rules = createGitignoreRules(gitignores);
  const all = [
    ...files,
    ...[...gitignores.keys()].map((d) => (d === "" ? ".gitignore" : `${d}/.gitignore`)),
  ];
  return all.filter((p) => rules.ignores(p));
}

function same(files: string[], gitignores: Record<string, string>): void {
  const map = new Map(Object.entries(gitignores));
  const theirs = gitIgnored(files, map).sort();
  assert.ok(theirs.length > 0, "git ignores something here");
  assert.deepEqual(ours(files, map).sort(), theirs);
}

describe("gitignore rules, as git decides", () => {
  it("root patterns: globs, anchoring, directory-only, negation, **, comments, escapes", () => {
    same(
      [
        "a.pyc",
        "src/b.pyc",
        "important.pyc",
        "build/out.js",
        "src/build/x.js",
        "build.txt",
        "docs/build",
        "only/root.txt",
        "sub/only/root.txt",
        "deep/a/b/tmp/c.txt",
        "tmp/d.txt",
        "#hash",
        "!bang",
        "trailing ",
        "q?.txt",
        "qx.txt",
        "[ab].txt",
        "a.txt",
        "x/y/z/w.log",
        "x/keep.log",
        "CaSe.TXT",
      ],
      {
        "": [
          "# a comment",
          "*.pyc",
          "!important.pyc",
          "build/",
          "/only/",
          "**/tmp/**",
          "\\#hash",
          "\\!bang",
          "trailing\\ ",
          "q\\?.txt",
          "\\[ab\\].txt",
          "x/**/*.log",
          "!x/keep.log",
          "case.txt",
          "   ",
          "",
        ].join("\n"),
      },
    );
  });

  it("nested files: relative to their directory, deeper files win, nothing re-included under an ignored directory", () => {
    same(
      [
        "a.log",
        "sub/a.log",
        "sub/keep.log",
        "sub/here.txt",
        "sub/deeper/here.txt",
        "sub/deeper/a.log",
        "sub/deeper/x.tmp",
        "other/here.txt",
        "gone/x/keep.txt",
        "gone/y.txt",
        "re/inc/a.txt",
        "re/inc/b.txt",
      ],
      {
        "": "*.tmp\ngone/\nre/*\n",
        sub: "*.log\n!keep.log\n/here.txt\n",
        "sub/deeper": "!*.log\n!*.tmp\n",
        gone: "!x/\n!keep.txt\n",
        re: "!inc/\ninc/b.txt\n",
      },
    );
  });

  it("a .gitignore that ignores itself or everything; CRLF lines", () => {
    same(["a.txt", "d/b.txt"], { "": ".gitignore\r\na.txt\r\n" });
    same(["a.txt", "d/b.txt", "d/c.txt"], { "": "*\n", d: "!c.txt\n" });
    same(["a.txt", "d/b.txt", "d/c.txt"], { "": "*\n!*/\n", d: "!c.txt\n" });
  });

  it("directories whose names are glob characters or start with # or !", () => {
    const files = [
      "[x]/a.log",
      "[x]/b.txt",
      "*/a.log",
      "#d/a.log",
      "!e/a.log",
      "q?/a.log",
      "sp ace/a.log",
    ];
    same(files, {
      "[x]": "*.log\n",
      "*": "*.log\n",
      "#d": "*.log\n",
      "!e": "a.log\n",
      "q?": "/a.log\n",
      "sp ace": "a.*\n",
    });
  });

  it("rewrites a nested pattern to the root: anchored or at any depth below", () => {
    assert.equal(rootRelativePattern("sub", "*.log"), "sub/**/*.log");
    assert.equal(rootRelativePattern("sub", "/a.txt"), "sub/a.txt");
    assert.equal(rootRelativePattern("sub", "a/b"), "sub/a/b");
    assert.equal(rootRelativePattern("sub", "build/"), "sub/**/build/");
    assert.equal(rootRelativePattern("sub", "!keep"), "!sub/**/keep");
    assert.equal(rootRelativePattern("a[b]", "x"), "a\\[b\\]/**/x");
    assert.equal(rootRelativePattern("sub", "# comment"), undefined);
    assert.equal(rootRelativePattern("sub", "   "), undefined);
    assert.equal(rootRelativePattern("sub", "/"), undefined);
  });
});
