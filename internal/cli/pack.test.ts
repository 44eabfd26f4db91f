/**
 * The workspace packer: .gitignore rules chosen exactly as git chooses them (checked
 * against git itself), symlinks never followed out of the tree, .git/ never packed, the
 * size caps, and a deterministic archive.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import * as tar from "tar-stream";
import { IgnoreStack, parseGitignore } from "../../clients/typescript/src/gitignore.ts";
import { PackError, packWorkspace } from "../../clients/typescript/src/pack.ts";

let tmp: string;
const MiB = 1024 * 1024;

before(() => {
  tmp = mkdtempSync(join(tmpdir(), "agentctl-pack-"));
  // Neither the machine's nor the user's git configuration may change what git answers.
  process.env.GIT_CONFIG_GLOBAL = "/dev/null";
  process.env.GIT_CONFIG_NOSYSTEM = "1";
});
after(() => rmSync(tmp, { recursive: true, force: true }));

function write(root: string, files: Record<string, string>): void {
  for (const [p, data] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), data);
  }
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    "git",
    [
      "-c",
      "user.email=t@example.com",
      "-c",
      "user.name=t",
      "-c",
      "init.defaultBranch=main",
      ...args,
    ],
    { cwd, encoding: "utf8" },
  );
}

interface TarItem {
  name: string;
  type: string;
  linkname?: string;
  mode?: number;
  data: string;
}

async function untar(gz: Buffer): Promise<TarItem[]> {
  const items: TarItem[] = [];
  const ex = tar.extract();
  ex.on("entry", (h, stream, next) => {
    const parts: Buffer[] = [];
    stream.on("data", (c: unknown) => parts.push(c as Buffer));
    stream.on("end", () => {
      items.push({
        name: h.name,
        type: h.type ?? "file",
        ...(h.linkname ? { linkname: h.linkname } : {}),
        ...(h.mode === undefined ? {} : { mode: h.mode }),
        data: Buffer.concat(parts).toString("utf8"),
      });
      next();
    });
  });
  const done = new Promise<void>((r) => ex.on("finish", () => r()));
  Readable.from([gunzipSync(gz)]).pipe(ex);
  await done;
  return items;
}

const TREE: Record<string, string> = {
  ".gitignore": [
    "# build output",
    "*.log",
    "!keep.log",
    "/build/",
    "node_modules",
    "docs/*.tmp",
    "**/cache/**",
    "dironly/",
    "file[0-9].dat",
    "?.q",
    "trail.txt   ",
    "\\#hash",
    "",
  ].join("\n"),
  "a.log": "x",
  "keep.log": "x",
  "build/out.js": "x",
  "src/build/x.js": "x",
  "node_modules/m/index.js": "x",
  "src/node_modules/y.js": "x",
  "docs/a.tmp": "x",
  "docs/deep/b.tmp": "x",
  "x/cache/c.bin": "x",
  "cache/d.bin": "x",
  "dironly/f": "x",
  "src/dironly": "a file, not a directory",
  "file1.dat": "x",
  "fileX.dat": "x",
  "a.q": "x",
  "ab.q": "x",
  "trail.txt": "x",
  "#hash": "x",
  "sub/.gitignore": "*.txt\n!important.txt\n/local-only\n",
  "sub/a.txt": "x",
  "sub/important.txt": "x",
  "sub/local-only": "x",
  "sub/deeper/local-only": "x",
  "sub/deeper/t.txt": "x",
  "sub/deeper/ok.md": "x",
  "README.md": "hello",
};

describe("gitignore rules", () => {
  it("parses negation, anchoring and directory-only patterns", () => {
    const s = new IgnoreStack().child("", "*.log\n!keep.log\n/build/\nfoo/bar\n");
    assert.equal(s.ignores("a.log", false), true);
    assert.equal(s.ignores("x/a.log", false), true);
    assert.equal(s.ignores("keep.log", false), false);
    assert.equal(s.ignores("build", true), true);
    assert.equal(s.ignores("build", false), false, "dir-only pattern, a file");
    assert.equal(s.ignores("src/build", true), false, "anchored to the root");
    assert.equal(s.ignores("foo/bar", false), true);
    assert.equal(s.ignores("x/foo/bar", false), false, "a middle slash anchors");
    assert.equal(parseGitignore("# c\n\n   \n", "").length, 0);
  });

  it("choose the same files as git ls-files --others --exclude-standard", async () => {
    const root = join(tmp, "rules");
    write(root, TREE);
    const walked = await packWorkspace({ root, maxBytes: 8 * MiB, useGit: false });
    assert.equal(walked.source, "walk");
    git(root, "init", "-q");
    const byGit = git(root, "ls-files", "--others", "--exclude-standard")
      .split("\n")
      .filter((l) => l !== "")
      .sort();
    assert.deepEqual(walked.paths, byGit);
    // Spot checks, so the comparison cannot pass vacuously.
    assert.ok(walked.paths.includes("keep.log") && !walked.paths.includes("a.log"));
    assert.ok(walked.paths.includes("src/build/x.js") && !walked.paths.includes("build/out.js"));
    assert.ok(walked.paths.includes("sub/important.txt") && !walked.paths.includes("sub/a.txt"));
    assert.ok(walked.paths.includes("sub/deeper/local-only"));
    const inGit = await packWorkspace({ root, maxBytes: 8 * MiB });
    assert.equal(inGit.source, "git");
    assert.deepEqual(inGit.paths, byGit);
  });
});

describe("packWorkspace", () => {
  it("keeps links inside the tree, leaves out links that lead outside, never follows them", async () => {
    const outside = join(tmp, "outside");
    write(outside, { "secret.txt": "outside secret" });
    const root = join(tmp, "links");
    write(root, { "src/a.txt": "a", "tool.sh": "#!/bin/sh\n" });
    chmodSync(join(root, "tool.sh"), 0o755);
    symlinkSync("src/a.txt", join(root, "rel-link"));
    symlinkSync(join(root, "src", "a.txt"), join(root, "abs-inside"));
    symlinkSync("/etc/passwd", join(root, "abs-outside"));
    symlinkSync("../outside/secret.txt", join(root, "climbs-out"));
    symlinkSync(outside, join(root, "dir-outside"));
    symlinkSync("missing.txt", join(root, "dangling"));
    const r = await packWorkspace({ root, maxBytes: 8 * MiB, useGit: false });
    const items = await untar(r.archive);
    const byName = new Map(items.map((i) => [i.name, i]));
    assert.equal(byName.get("rel-link")?.linkname, "src/a.txt");
    assert.equal(byName.get("abs-inside")?.linkname, "src/a.txt", "absolute link made relative");
    assert.equal(byName.get("dangling")?.type, "symlink");
    for (const n of ["abs-outside", "climbs-out", "dir-outside"]) {
      assert.ok(!byName.has(n), `${n} is left out`);
      assert.ok(r.skipped.some((s) => s.path === n));
    }
    assert.ok(!items.some((i) => i.data.includes("outside secret")), "nothing outside is read");
    assert.equal((byName.get("tool.sh")?.mode ?? 0) & 0o111, 0o111, "executable bit kept");
  });

  it("skips a tracked file whose directory was replaced by a link out of the tree", async () => {
    const outside = join(tmp, "outside2");
    write(outside, { "x.txt": "outside" });
    const root = join(tmp, "swapped");
    write(root, { "real/x.txt": "inside", "keep.txt": "k" });
    git(root, "init", "-q");
    git(root, "add", ".");
    git(root, "commit", "-qm", "init");
    rmSync(join(root, "real"), { recursive: true });
    symlinkSync(outside, join(root, "real"));
    const r = await packWorkspace({ root, maxBytes: 8 * MiB });
    const items = await untar(r.archive);
    assert.ok(!items.some((i) => i.data === "outside"), "the file behind the link is not read");
    assert.ok(items.some((i) => i.name === "keep.txt"));
    assert.ok(!items.some((i) => i.name === "real"), "the link to outside is left out too");
  });

  it("never packs .git, even outside a work tree", async () => {
    const root = join(tmp, "dotgit");
    write(root, { ".git/config": "[core]", "a/.git/HEAD": "ref", "a/b.txt": "b" });
    const r = await packWorkspace({ root, maxBytes: 8 * MiB, useGit: false });
    assert.deepEqual(r.paths, ["a/b.txt"]);
  });

  it("refuses a tree over the caps, naming the largest entries", async () => {
    const root = join(tmp, "big");
    write(root, { "small.txt": "s", "assets/blob.bin": "" });
    // Incompressible content.
    writeFileSync(
      join(root, "assets", "blob.bin"),
      Buffer.from(Array.from({ length: 64 * 1024 }, () => Math.floor(Math.random() * 256))),
    );
    await assert.rejects(
      packWorkspace({ root, maxBytes: 16 * 1024, useGit: false }),
      (err: unknown) =>
        err instanceof PackError &&
        /at most 16\.0 KiB/.test(err.message) &&
        /Largest: assets\/ \(64\.0 KiB\)/.test(err.message) &&
        /\.gitignore/.test(err.message),
    );
    await assert.rejects(
      packWorkspace({ root, maxBytes: 8 * MiB, maxContentBytes: 1024, useGit: false }),
      (err: unknown) => err instanceof PackError && /more than 1\.0 KiB/.test(err.message),
    );
  });

  it("packs an empty tree into a valid archive and is deterministic", async () => {
    const empty = join(tmp, "empty");
    mkdirSync(empty);
    const r = await packWorkspace({ root: empty, maxBytes: 8 * MiB, useGit: false });
    assert.equal(r.files, 0);
    assert.equal(gunzipSync(r.archive).subarray(257, 262).toString("latin1"), "ustar");
    const root = join(tmp, "rules");
    const a = await packWorkspace({ root, maxBytes: 8 * MiB });
    const b = await packWorkspace({ root, maxBytes: 8 * MiB });
    assert.ok(a.archive.equals(b.archive));
  });
});
