/**
 * The workspace patch, hostile: every patch is applied with the real `git apply` onto the
 * base in a fresh repository and the result compared with the workspace (minus what is
 * ignored or left out). Workspaces are tar streams made by tar-stream's pack.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import { AgentdError, isAgentdError } from "../errors.ts";
import { createRedactor } from "../kernel/redaction.ts";
import {
  DEFAULT_MAX_PATCH_BYTES,
  type DiffWorkspaceOptions,
  diffWorkspace,
  diffWorkspaces,
  type WorkspaceDiffResult,
} from "./workspace-diff.ts";
import {
  expectedTree,
  filesOf,
  gitApply,
  type Item,
  type TreeEntry,
  tarBytes,
  tarStream,
  treeOf,
} from "./workspace-diff-fixtures.ts";

const MiB = 1024 * 1024;

async function diff(
  base: readonly Item[],
  current: readonly Item[],
  opts: Partial<DiffWorkspaceOptions> = {},
): Promise<WorkspaceDiffResult> {
  return diffWorkspace({
    base: filesOf(base),
    openExport: () => tarStream(current),
    maxPatchBytes: 64 * MiB,
    ...opts,
  });
}

/** Diffs, applies with git, and checks the tree git leaves against the workspace. */
async function roundTrip(
  base: readonly Item[],
  current: readonly Item[],
  opts: Partial<DiffWorkspaceOptions> = {},
  untouched: readonly string[] = [],
): Promise<WorkspaceDiffResult> {
  const r = await diff(base, current, opts);
  const baseTree = treeOf(base);
  const applied = r.patch === "" ? baseTree : gitApply(baseTree, r.patch);
  const expected = expectedTree(baseTree, treeOf(current), r, opts.redact);
  // Files whose redacted lines the patch does not touch keep them as they were.
  for (const p of untouched) expected.set(p, treeOf(current).get(p) as TreeEntry);
  assert.deepEqual(applied, expected);
  return r;
}

const text = (path: string, data: string, mode = 0o644): Item => ({ path, data, mode });
const link = (path: string, linkname: string): Item => ({ path, type: "symlink", linkname });

describe("workspace patch: git apply gives the workspace back", () => {
  it("text, binary, modes, deletions and in-tree symlinks", async () => {
    const bin = randomBytes(300);
    const base = [
      text("README.md", "# hi\n\nsome text\n"),
      text("src/a.ts", "export const a = 1;\n"),
      text("gone.txt", "bye\n"),
      { path: "img.bin", data: Buffer.concat([Buffer.from([0]), bin]) },
      { path: "old.bin", data: Buffer.from([0, 1, 2]) },
      text("run.sh", "echo hi\n"),
    ];
    const current = [
      text("README.md", "# hi\n\nmore text\n"),
      text("src/a.ts", "export const a = 2;\n", 0o755),
      { path: "img.bin", data: Buffer.concat([Buffer.from([0]), bin, bin]) },
      { path: "new.bin", data: randomBytes(5000) },
      text("run.sh", "echo hi\n", 0o755),
      link("docs", "src"),
      link("src/up", "../README.md"),
    ];
    const r = await roundTrip(base, current);
    assert.deepEqual(r.added, ["docs", "new.bin", "src/up"]);
    assert.deepEqual(r.modified, ["README.md", "img.bin", "run.sh", "src/a.ts"]);
    assert.deepEqual(r.deleted, ["gone.txt", "old.bin"]);
    assert.deepEqual(r.binary, ["img.bin", "new.bin", "old.bin"]);
    assert.deepEqual(r.omitted, []);
    assert.match(r.patch, /^diff --git a\/README.md b\/README.md\n--- a\/README.md\n/);
    assert.match(r.patch, /\nindex [0-9a-f]{40}\.\.[0-9a-f]{40}\nGIT binary patch\nliteral 601\n/);
    assert.match(r.patch, /\nold mode 100644\nnew mode 100755\n/);
    assert.doesNotMatch(r.patch, /Binary files/);
  });

  it("nothing changed: an empty patch", async () => {
    const items = [text("a.txt", "a\n"), link("l", "a.txt"), { path: "b", data: Buffer.from([0]) }];
    const r = await roundTrip(items, [{ path: "d", type: "directory" }, ...items]);
    assert.equal(r.patch, "");
    assert.deepEqual([r.added, r.modified, r.deleted, r.omitted], [[], [], [], []]);
  });

  it("names with spaces, quotes, tabs, newlines, unicode and diff-like parts", async () => {
    const names = [
      "with space.txt",
      " leading space",
      "trailing space ",
      'quo"te.txt',
      // (a name holding a backslash is left out: git on Windows refuses it, attack4-windows-link-targets)
      "tab\there",
      "new\nline",
      "ünïcødé/文件.txt",
      "emoji 😀.md",
      "x b/y.txt",
      "-dash",
      "#hash",
      "!bang",
      "...",
      "a b/c d/e f",
    ];
    const base = names.map((n) => text(n, `old ${n}\n`));
    const current = [
      ...names.map((n) => text(n, `new ${n}\n`)),
      ...names.map((n) => ({ path: `bin/${n}`, data: Buffer.from([0, 1, n.length]) })),
      ...names.map((n) => text(`added/${n}`, "fresh")),
    ];
    const r = await roundTrip(base, current);
    assert.equal(r.modified.length, names.length);
    assert.equal(r.added.length, 2 * names.length);
    assert.deepEqual(r.omitted, []);
    assert.match(r.patch, /^diff --git "a\/new\\nline" "b\/new\\nline"$/m);
    // And the other way: every one deleted.
    await roundTrip(current, []);
  });

  it("a file replaced by a directory and back, a symlink by a file and back", async () => {
    const base = [
      text("x", "was a file\n"),
      text("d/a", "in a dir\n"),
      text("d/b/c", "deeper\n"),
      link("l", "x"),
      text("f", "becomes a link\n"),
      { path: "bin", data: Buffer.from([0, 9]) },
    ];
    const current = [
      text("x/inside", "now a dir\n"),
      text("d", "now a file\n"),
      text("l", "now a file\n"),
      link("f", "x/inside"),
      link("bin", "d"),
    ];
    const r = await roundTrip(base, current);
    assert.deepEqual(r.modified, ["bin", "f", "l"]);
    assert.deepEqual(r.deleted, ["d/a", "d/b/c", "x"]);
    assert.deepEqual(r.added, ["d", "x/inside"]);
  });

  it("empty files, missing final newlines, CRLF, lone CR, a BOM", async () => {
    const base = [
      text("empty-then-full", ""),
      text("full-then-empty", "x\ny\n"),
      text("empty-gone", ""),
      text("nonl", "a\nb"),
      text("crlf", "one\r\ntwo\r\nthree\r\n"),
      text("mixed", "a\r\nb\nc\rd\n"),
      text("bom", "\uFEFFhello\n"),
    ];
    const current = [
      text("empty-then-full", "now\n"),
      text("full-then-empty", ""),
      text("empty-new", ""),
      text("nonl", "a\nB"),
      text("crlf", "one\r\nTWO\r\nthree\r\nfour"),
      text("mixed", "a\r\nb\nC\rd\n"),
      text("bom", "\uFEFFhello\nworld\n"),
      text(
        "diff-like",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\ndiff --git a/y b/y\n\\ No newline at end of file\n",
      ),
    ];
    const r = await roundTrip(base, current);
    assert.deepEqual(r.binary, []);
    assert.deepEqual(r.added, ["diff-like", "empty-new"]);
    assert.deepEqual(r.deleted, ["empty-gone"]);
    // And content that looks like a patch, removed again.
    await roundTrip(current, base);
  });

  it("a text file that becomes binary and a binary one that becomes text", async () => {
    const base = [text("t", "text\n"), { path: "b", data: Buffer.from([0, 0, 1]) }];
    const current = [{ path: "t", data: Buffer.from([0, 0, 1]) }, text("b", "text now\n")];
    const r = await roundTrip(base, current);
    assert.deepEqual(r.binary, ["b", "t"]);
  });

  it("invalid UTF-8 content without a NUL is binary, a NUL past 8000 bytes is text as git says", async () => {
    const late = Buffer.concat([Buffer.from("a".repeat(9000)), Buffer.from([0, 0x0a])]);
    const r = await roundTrip(
      [],
      [
        { path: "latin1", data: Buffer.from([0xe9, 0x0a]) },
        { path: "late", data: late },
      ],
    );
    assert.deepEqual(r.binary, ["latin1"]);
  });

  it("hard links carry their content; fifos and invalid UTF-8 names are left out, with the reason", async () => {
    const r = await roundTrip(
      [],
      [
        text("first", "shared\n"),
        { path: "second", type: "link", linkname: "first" },
        { path: "pipe", type: "fifo" },
      ],
    );
    assert.deepEqual(r.added, ["first", "second"]);
    assert.deepEqual(r.omitted, [
      { path: "pipe", reason: "a fifo: a patch carries files and symlinks only" },
    ]);
    const raw = await rawNameTar("bad-\xff\xfe.txt");
    const bad = await diffWorkspace({
      base: [],
      openExport: () => once(raw),
      maxPatchBytes: MiB,
    });
    assert.equal(bad.patch, "");
    assert.equal(bad.omitted[0]?.reason, "its name (or its target) is not valid UTF-8");
  });

  it("the .git directory is never part of the patch; names git would take for .git are left out", async () => {
    const r = await roundTrip(
      [],
      [
        text(".git/config", "[core]\n"),
        text("vendor/lib/.git/HEAD", "ref\n"),
        text(".GIT/x", "x\n"),
        text("a/.git./y", "y\n"),
        text("GIT~1/z", "z\n"),
        text(".g\u200cit/w", "w\n"),
        link(".gitmodules", "x"),
        text("ok.txt", "ok\n"),
      ],
    );
    assert.deepEqual(r.added, ["ok.txt"]);
    assert.deepEqual(
      r.omitted.map((o) => o.path),
      // git's order: by UTF-8 bytes (U+200C is e2 80 8c).
      [".GIT/x", ".gitmodules", ".g\u200cit/w", "GIT~1/z", "a/.git./y"],
    );
  });
});

describe("workspace patch: .gitignore", () => {
  it("ignores untracked files as git does (root and nested files, negation, dir-only, **)", async () => {
    const base = [text("keep.pyc", "tracked\n"), text("src/app.py", "print(1)\n")];
    const current = [
      text(".gitignore", "*.pyc\n__pycache__/\n!important.pyc\nbuild/\n**/tmp/**\n"),
      text("keep.pyc", "tracked, changed\n"),
      text("src/app.py", "print(2)\n"),
      { path: "src/__pycache__/app.cpython-311.pyc", data: Buffer.from([0, 1]) },
      text("src/x.pyc", "x"),
      text("important.pyc", "i"),
      text("build/out.js", "o"),
      text("a/tmp/b/c.txt", "t"),
      text("sub/.gitignore", "*.log\n!keep.log\n/only-here.txt\n"),
      text("sub/a.log", "l"),
      text("sub/keep.log", "k"),
      text("sub/only-here.txt", "h"),
      text("sub/deeper/only-here.txt", "h"),
      text("other/a.log", "l"),
    ];
    const r = await roundTrip(base, current);
    assert.deepEqual(r.added.sort(), [
      ".gitignore",
      "important.pyc",
      "other/a.log",
      "sub/.gitignore",
      "sub/deeper/only-here.txt",
      "sub/keep.log",
    ]);
    assert.deepEqual(r.modified, ["keep.pyc", "src/app.py"]);
    assert.equal(r.ignored, 6);
  });

  it("new files in node_modules (a setup's installs) stay out without a .gitignore; tracked ones do not", async () => {
    const base = [text("package.json", "{}\n"), text("vendor/node_modules/kept/index.js", "a\n")];
    const r = await roundTrip(base, [
      text("package.json", '{"a":1}\n'),
      text("node_modules/is-number/index.js", "module.exports = 1;\n"),
      text("node_modules/.package-lock.json", "{}\n"),
      text("pkg/node_modules/x/y.js", "y\n"),
      text("vendor/node_modules/kept/index.js", "b\n"),
      text("not_node_modules/z.js", "z\n"),
    ]);
    assert.deepEqual(r.added, ["not_node_modules/z.js"]);
    assert.deepEqual(r.modified.sort(), ["package.json", "vendor/node_modules/kept/index.js"]);
    assert.equal(r.ignored, 3);
  });

  it("a .gitignore that ignores itself, or everything: tracked changes still go in", async () => {
    const base = [text("tracked.txt", "a\n"), text("gone.txt", "g\n")];
    const self = await roundTrip(base, [
      text(".gitignore", ".gitignore\n"),
      text("tracked.txt", "b\n"),
      text("new.txt", "n\n"),
    ]);
    assert.deepEqual(
      [self.added, self.modified, self.deleted],
      [["new.txt"], ["tracked.txt"], ["gone.txt"]],
    );
    assert.equal(self.ignored, 1);
    const all = await roundTrip(base, [
      text(".gitignore", "*\n"),
      text("tracked.txt", "b\n"),
      text("dir/new.txt", "n\n"),
    ]);
    assert.deepEqual([all.added, all.modified, all.deleted], [[], ["tracked.txt"], ["gone.txt"]]);
    assert.equal(all.ignored, 2);
  });

  it("a huge .gitignore is not read (its rules do not apply)", async () => {
    const r = await diff(
      [],
      [text(".gitignore", `*.txt\n${"#".repeat(70 * 1024)}\n`), text("a.txt", "a")],
    );
    assert.deepEqual(r.added, [".gitignore", "a.txt"]);
  });
});

describe("workspace patch: symlinks stay inside", () => {
  it("absolute targets, climbs above the root and chains are left out, in-tree links stay", async () => {
    const base = [text("a.txt", "a\n"), link("ok", "a.txt"), link("y", "sub")];
    const current = [
      text("a.txt", "a\n"),
      link("ok", "a.txt"),
      link("r", "/"),
      link("pw", "/etc/passwd"),
      link("up", ".."),
      link("sub/deep", "../../x"),
      link("sub/fine", "../a.txt"),
      link("here", "."),
      link("chain", "here/.."),
      link("y", "."),
      link("dangling", "nowhere"),
    ];
    const r = await roundTrip(base, current);
    const reasons = Object.fromEntries(r.omitted.map((o) => [o.path, o.reason]));
    assert.deepEqual(reasons, {
      chain: "a symlink that leads out of the workspace",
      pw: "a symlink that points to an absolute path",
      r: "a symlink that points to an absolute path",
      "sub/deep": "a symlink that leads out of the workspace",
      up: "a symlink that leads out of the workspace",
    });
    assert.deepEqual(r.added, ["dangling", "here", "sub/fine"]);
    assert.deepEqual(r.modified, ["y"]);
    assert.doesNotMatch(r.patch, /etc\/passwd|^\+\/$/m);
  });

  it("a changed link that would make an unchanged link lead out is left out (the base link stays)", async () => {
    const base = [text("a/b/f", "f\n"), link("y", "a/b"), link("x", "y/..")];
    const r = await roundTrip(base, [text("a/b/f", "f\n"), link("y", "."), link("x", "y/..")]);
    assert.deepEqual(r.omitted, [
      { path: "y", reason: "a symlink through which another symlink leads out of the workspace" },
    ]);
    assert.equal(r.patch, "");
  });
});

describe("workspace patch: secrets", () => {
  const SECRET = "hunter2-s3cr3t-value";
  const redactor = createRedactor({ secrets: () => [SECRET] });
  const redact = (s: string) => redactor.text(s);

  it("redacts text on both sides, leaves out binaries, names and link targets holding one", async () => {
    const filler = Array.from({ length: 20 }, (_, i) => `line ${i}`).join("\n");
    const base = [
      text("config.env", `A=1\nTOKEN=${SECRET}\nB=2\n`),
      text("far.txt", `top ${SECRET}\n${filler}\nend\n`),
      text("plain.txt", "plain\n"),
      text("same.txt", "value: [REDACTED]\n"),
    ];
    const current = [
      text("config.env", `A=1\nTOKEN=${SECRET}\nB=3\n`),
      text("far.txt", `top ${SECRET}\n${filler}\nEND\n`),
      text("plain.txt", `plain\nleaked ${SECRET}\n`),
      text("same.txt", `value: ${SECRET}\n`),
      { path: "blob.bin", data: Buffer.concat([Buffer.from([0]), Buffer.from(SECRET)]) },
      { path: "b64.bin", data: Buffer.from(`\0${Buffer.from(SECRET).toString("base64")}`) },
      text(`name-${SECRET}.txt`, "x\n"),
      link("lnk", `dir/${SECRET}`),
      { path: "clean.bin", data: Buffer.from([0, 1, 2]) },
    ];
    const r = await roundTrip(base, current, { redact }, ["far.txt"]);
    assert.ok(!r.patch.includes(SECRET), "no secret in the patch");
    assert.equal(redact(r.patch), r.patch);
    assert.deepEqual(r.redactedFiles, ["config.env", "far.txt", "plain.txt"]);
    const reasons = Object.fromEntries(r.omitted.map((o) => [o.path, o.reason]));
    assert.deepEqual(reasons, {
      "b64.bin": "a binary file holding a secret value",
      "blob.bin": "a binary file holding a secret value",
      lnk: "a symlink whose target holds a secret value",
      "name-[REDACTED].txt": "its name holds a secret value",
      "same.txt": "only a secret value changed in it",
    });
    // The secret sat in the hunk's context: the file is replaced whole (and still applies);
    // far from the hunk: ordinary hunks.
    assert.deepEqual(r.binary, ["clean.bin", "config.env"]);
    assert.match(r.patch, /^\+leaked \[REDACTED\]$/m);
    assert.match(r.patch, /^-end\n\+END$/m);
  });

  it("a block whose encoding a rule matches is left out (the backstop)", async () => {
    const data = randomBytes(2000);
    const plain = await diff([], [{ path: "r.bin", data }]);
    const snippet = plain.patch.split("\n")[5]?.slice(10, 30) ?? "";
    const hides = (s: string) => s.replaceAll(snippet, "[REDACTED]");
    const r = await diff([], [{ path: "r.bin", data }], { redact: hides });
    assert.equal(r.patch, "");
    assert.deepEqual(r.omitted, [
      { path: "r.bin", reason: "its patch would show a value the redactor hides" },
    ]);
  });
});

describe("workspace patch: limits and failures", () => {
  it("changes larger than maxPatchBytes fail before their content is read, naming the limit", async () => {
    let opened = 0;
    const current = [{ path: "big.bin", data: randomBytes(3000) }, text("small", "s")];
    await assert.rejects(
      diffWorkspace({
        base: [],
        openExport: () => {
          opened++;
          return tarStream(current);
        },
        maxPatchBytes: 2048,
      }),
      (err: unknown) =>
        isAgentdError(err, "ETOOLARGE") &&
        err.field === "limits.maxPatchSize" &&
        err.message ===
          `the run's changes (3001 bytes in "big.bin" and 1 other files) exceed limits.maxPatchSize (2048 bytes)`,
    );
    assert.equal(opened, 1, "pass 2 never started");
  });

  it("a formatted patch over the limit fails too (binary encoding grows random data)", async () => {
    await assert.rejects(
      diff([], [{ path: "r.bin", data: randomBytes(1000) }], { maxPatchBytes: 1100 }),
      (err: unknown) =>
        isAgentdError(err, "ETOOLARGE") &&
        /exceed limits\.maxPatchSize \(1100 bytes\)/.test(err.message),
    );
  });

  it("a workspace that changes between the two reads fails with ECONFLICT", async () => {
    let n = 0;
    await assert.rejects(
      diffWorkspace({
        base: [],
        openExport: () => tarStream([text("a.txt", n++ === 0 ? "one\n" : "two\n")]),
        maxPatchBytes: MiB,
      }),
      (err: unknown) => isAgentdError(err, "ECONFLICT"),
    );
  });

  it("a corrupt export fails with EIO; an error of the export itself passes through", async () => {
    const good = await tarBytes([text("a.txt", "a".repeat(5000))]);
    await assert.rejects(
      diffWorkspace({
        base: [],
        openExport: () => once(good.subarray(0, 2000)),
        maxPatchBytes: MiB,
      }),
      (err: unknown) => isAgentdError(err, "EIO"),
    );
    const garbage = Buffer.alloc(1024, 0x41);
    await assert.rejects(
      diffWorkspace({ base: [], openExport: () => once(garbage), maxPatchBytes: MiB }),
      (err: unknown) => isAgentdError(err, "EIO"),
    );
    const dup = await tarBytes([text("a", "1"), text("a", "2")]);
    await assert.rejects(
      diffWorkspace({ base: [], openExport: () => once(dup), maxPatchBytes: MiB }),
      (err: unknown) => isAgentdError(err, "EIO") && /twice/.test(err.message),
    );
    const inside = await tarBytes([text("a", "1"), text("a/b", "2")]);
    await assert.rejects(
      diffWorkspace({ base: [], openExport: () => once(inside), maxPatchBytes: MiB }),
      (err: unknown) => isAgentdError(err, "EIO") && /non-directory/.test(err.message),
    );
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield good.subarray(0, 1024);
      throw new AgentdError("ETOOLARGE", "export too long");
    }
    await assert.rejects(
      diffWorkspace({ base: [], openExport: failing, maxPatchBytes: MiB }),
      (err: unknown) => isAgentdError(err, "ETOOLARGE") && err.message === "export too long",
    );
  });

  it("a workspace of more entries than maxEntries fails with ETOOLARGE", async () => {
    const many = Array.from({ length: 30 }, (_, i) => text(`d/f${i}`, ""));
    await assert.rejects(
      diff([], many, { maxEntries: 25 }),
      (err: unknown) => isAgentdError(err, "ETOOLARGE") && /more than 25 files/.test(err.message),
    );
    assert.equal((await diff([], many, { maxEntries: 31 })).added.length, 30);
  });

  it("an aborted signal stops the diff", async () => {
    const ac = new AbortController();
    ac.abort(new Error("cancelled"));
    await assert.rejects(diff([], [text("a", "a")], { signal: ac.signal }), /cancelled/);
  });

  it("10,000 small files: every change found, and the patch turns the base into the current tree", async () => {
    const base = Array.from({ length: 10_000 }, (_, i) => text(`d${i % 100}/f${i}.txt`, `v${i}\n`));
    const current = [
      ...base.slice(500).map((f, i) => (i % 10 === 0 ? text(f.path, `changed ${i}\n`) : f)),
      ...Array.from({ length: 500 }, (_, i) => text(`n${i % 50}/g${i}.txt`, `n${i}\n`)),
    ];
    // How long this takes is a figure for bench/workspace-diff.ts, not an assertion here.
    const exported = await tarBytes(current);
    const r = await diffWorkspace({
      base: filesOf(base),
      openExport: () => once(exported),
      maxPatchBytes: 64 * MiB,
    });
    assert.deepEqual([r.modified.length, r.added.length, r.deleted.length], [950, 500, 500]);
    const applied = gitApply(treeOf(base), r.patch);
    assert.deepEqual(applied, treeOf(current));
  });
});

describe("diffWorkspaces (both workspaces in memory)", () => {
  it("gives the same patch as the streaming diff", async () => {
    const base = [text("a.txt", "a\n"), { path: "b.bin", data: Buffer.from([0, 1]) }];
    const current = [
      text("a.txt", "b\n"),
      link("r", "/"),
      { path: "b.bin", data: Buffer.from([0, 2]) },
    ];
    const mem = await diffWorkspaces(filesOf(base), filesOf(current));
    const streamed = await diff(base, current);
    assert.deepEqual(mem, streamed);
    assert.equal(DEFAULT_MAX_PATCH_BYTES, 64 * MiB);
  });
});

async function* once(data: Uint8Array): AsyncGenerator<Uint8Array> {
  yield data;
}

/** A one-file tar whose name holds raw bytes (latin1 string: one char per byte). */
async function rawNameTar(raw: string): Promise<Buffer> {
  const placeholder = "p".repeat(raw.length);
  const buf = await tarBytes([text(placeholder, "x")]);
  buf.write(raw, 0, "latin1");
  buf.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += buf[i] as number;
  buf.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, "latin1");
  return buf;
}

describe("a streamed base (the run's upload read from the store)", () => {
  const streamed = (items: readonly Item[]) => ({ open: () => tarStream(items) });

  it("gives the same patch as the base in memory: text, binary, modes, deletions, links, .gitignore", async () => {
    const bin = randomBytes(300);
    const base = [
      text(".gitignore", "*.log\n"),
      text("README.md", "# hi\n\nsome text\n"),
      text("src/a.ts", "export const a = 1;\n"),
      text("gone.txt", "bye\n"),
      { path: "img.bin", data: Buffer.concat([Buffer.from([0]), bin]) },
      { path: "old.bin", data: Buffer.from([0, 1, 2]) },
      text("run.sh", "echo hi\n"),
      link("l", "README.md"),
    ];
    const current = [
      text(".gitignore", "*.log\n"),
      text("README.md", "# hi\n\nmore text\n"),
      text("src/a.ts", "export const a = 2;\n", 0o755),
      { path: "img.bin", data: Buffer.concat([Buffer.from([0]), bin, bin]) },
      { path: "new.bin", data: randomBytes(5000) },
      text("run.sh", "echo hi\n", 0o755),
      text("debug.log", "ignored\n"),
      link("l", "src/a.ts"),
    ];
    const inMemory = await diff(base, current);
    const fromStream = await diff(base, current, { base: streamed(base) });
    assert.deepEqual(fromStream, inMemory);
    assert.deepEqual(fromStream.deleted, ["gone.txt", "old.bin"]);
    assert.equal(fromStream.ignored, 1);
    const tree = gitApply(treeOf(base), fromStream.patch);
    assert.deepEqual(tree, expectedTree(treeOf(base), treeOf(current), fromStream));
  });

  it("reads back only the changed files' original content, and refuses one past the limit", async () => {
    const big = { path: "big.bin", data: Buffer.alloc(2 * MiB, 7) };
    const base = [big, text("a.txt", "a\n")];
    // Unchanged: the big file is scanned, never read back; the patch is the small change.
    const r = await diff(base, [big, text("a.txt", "b\n")], {
      base: streamed(base),
      maxPatchBytes: MiB,
    });
    assert.deepEqual(r.modified, ["a.txt"]);
    // Removed: its original is in the patch, over the limit: ETOOLARGE naming it.
    await assert.rejects(
      diff(base, [text("a.txt", "b\n")], { base: streamed(base), maxPatchBytes: MiB }),
      (err: unknown) =>
        isAgentdError(err, "ETOOLARGE") &&
        err.field === "limits.maxPatchSize" &&
        /the changed files' original content \(2097154 bytes in "big\.bin" and 1 other files\)/.test(
          err.message,
        ),
    );
  });

  it("an empty or corrupt stored base: every file new, or EIO", async () => {
    const current = [text("a.txt", "a\n")];
    const r = await diff([], current, { base: streamed([]) });
    assert.deepEqual(r.added, ["a.txt"]);
    await assert.rejects(
      diff([], current, { base: { open: () => once(Buffer.from("not a tar".repeat(100))) } }),
      (err: unknown) => isAgentdError(err, "EIO"),
    );
  });
});
