/** Literal words and shell globs against protected globs; bash brace expansion. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createPathGuard, expandBraces, tails } from "./protected-paths.ts";

const git = createPathGuard([".git", ".git/**"]);
const secrets = createPathGuard([
  ".env",
  ".env.*",
  "**/.env",
  "**/*.pem",
  "**/id_rsa*",
  "**/secrets/**",
  "**/credentials*",
]);

describe("createPathGuard", () => {
  it("normalises literal paths and tries every tail", () => {
    for (const p of [
      ".git",
      ".git/config",
      "./.git/hooks/x",
      "a/.git",
      "src/../.git/config",
      "/workspace/.git/HEAD",
      "/proc/self/cwd/.git/config",
      ".//.git",
    ])
      assert.ok(git.literal(p), p);
    for (const p of [".gitignore", ".github/x", "git", "src/a.ts", "legit/x"])
      assert.equal(git.literal(p), undefined, p);
    assert.ok(secrets.literal("deploy/id_rsa"));
    assert.ok(secrets.literal("/workspace/.env"));
    assert.ok(secrets.literal("secrets"));
  });
  it("finds shell globs that can reach a protected path", () => {
    for (const g of [
      ".gi?",
      ".gi?/config",
      ".[g]it",
      ".[!a]it",
      ".g*",
      ".*",
      "[.]git",
      "a/.g*/x",
      "../.gi?/config",
      "/workspace/.g*",
      ".g[h-j]t",
      ".?it/*",
    ])
      assert.ok(git.glob(g), g);
    for (const g of ["*", "*/*", "?git", "*git", "src/*.ts", "[.]gitx", ".gi?x", "*.git"])
      assert.equal(git.glob(g), undefined, g);
  });
  it("applies the shell's rule: wildcards never match a leading dot or a slash", () => {
    assert.equal(secrets.glob("*env"), undefined);
    assert.ok(secrets.glob(".e*"));
    assert.ok(secrets.glob("*/.env"));
    assert.equal(git.glob("?gi?"), undefined);
  });
  it("counts a glob whose wildcards fall inside a policy's literal name", () => {
    for (const g of [
      "cr?dentials.json",
      ".en?.local",
      ".e[n]v.production",
      "id_rs?.pub",
      "k?y.pem",
      "x.p?m",
      "sub/**/.env",
      "**",
    ])
      assert.ok(secrets.glob(g), g);
    const build = createPathGuard(["package.json", "**/Makefile", "**/*.yml", "**/.eslintrc*"]);
    for (const g of [
      "packag?.json",
      "pack[a]ge.json",
      "pack[!x]ge.json",
      "*ckage.json",
      "*.json",
      "Makef*",
      "sub/*/Makefil?",
      "a/**/Makefile",
      "ci.y?l",
      ".github/*/ci.yml",
      ".eslintr?.js",
    ])
      assert.ok(build.glob(g), g);
    for (const g of ["packag?.jsonx", "*.ts", "src/*.test.ts", "?akefile.bak", "*akefile/x"])
      assert.equal(build.glob(g), undefined, g);
    // find -name: `*` may start with a dot, but a dot met inside a name is no evidence.
    assert.equal(secrets.glob("*.ts", true), undefined);
    assert.equal(secrets.glob("*.orig", true), undefined);
    assert.ok(secrets.glob(".e*", true));
  });
  it("does not take a policy's own wildcards whole", () => {
    for (const g of ["deploy/id_*", "k*.pem", "*.pem", "cred*", "src/*", "*/x.pem", "secr?ts/a"])
      assert.ok(secrets.glob(g), g);
    for (const g of ["*.ts", "src/*.ts", "test/*.test.js", "docs/*.md"])
      assert.equal(secrets.glob(g), undefined, g);
  });
});

describe("expandBraces", () => {
  it("expands lists, sequences and nesting; keeps escapes", () => {
    assert.deepEqual(expandBraces("{.git,x}/config", 64), [".git/config", "x/config"]);
    assert.deepEqual(expandBraces("a{1..3}", 64), ["a1", "a2", "a3"]);
    assert.deepEqual(expandBraces("{a..c}", 64), ["a", "b", "c"]);
    assert.deepEqual(expandBraces("{a,{b,c}}", 64), ["a", "b", "c"]);
    assert.deepEqual(expandBraces("\\{a,b}", 64), ["\\{a,b}"]);
    assert.deepEqual(expandBraces("{a}", 64), ["{a}"]);
  });
  it("refuses expansions past the limit", () => {
    assert.equal(expandBraces("{1..1000}", 64), undefined);
    assert.equal(expandBraces("{a,b}".repeat(8), 64), undefined);
  });
});

describe("tails", () => {
  it("lists the normalised path and its tails", () => {
    assert.deepEqual(tails("./a//b/../c"), ["a/c", "c"]);
    assert.deepEqual(tails(""), []);
  });
});
