/** The workspace's agent configuration, read from its archive. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { MAX_CONFIG_FILE_BYTES, workspaceConfigFromArchive } from "./workspace-config.ts";

const file = (path: string, text: string | Buffer): WorkspaceFile => ({
  path,
  type: "file",
  mode: 0o644,
  data: Buffer.isBuffer(text) ? text : Buffer.from(text),
});

describe("workspaceConfigFromArchive", () => {
  it("finds skills (.agent/skills before .skills) and the memory file, regular files only", async () => {
    const tar = await packWorkspace([
      file(".skills/zeta/SKILL.md", "zeta"),
      file(".agent/skills/beta/SKILL.md", "beta"),
      file(".agent/skills/alpha/SKILL.md", "alpha"),
      file(".agent/skills/alpha/examples/SKILL.md", "too deep"),
      file(".agent/memory.md", "second choice"),
      { path: "AGENTS.md", type: "symlink", mode: 0o777, linkname: ".agent/memory.md" },
      file("src/a.js", "x"),
    ]);
    const c = await workspaceConfigFromArchive(tar);
    assert.deepEqual(
      c.skillFiles.map((f) => [f.path, f.content]),
      [
        [".agent/skills/alpha/SKILL.md", "alpha"],
        [".agent/skills/beta/SKILL.md", "beta"],
        [".skills/zeta/SKILL.md", "zeta"],
      ],
    );
    assert.deepEqual(c.memory, { path: ".agent/memory.md", content: "second choice" });
    assert.deepEqual(await workspaceConfigFromArchive(undefined), {
      skillFiles: [],
      commands: {},
      ecosystemImage: {},
      detected: { ecosystem: "base", reason: "an empty workspace" },
      setupInputs: new Map(),
    });
  });

  it("reads an archive of any size and cuts each file at 64 KiB", async () => {
    const tar = await packWorkspace([
      file("big.bin", Buffer.alloc(70 * 1024 * 1024, 0x61)),
      file("AGENTS.md", "m".repeat(MAX_CONFIG_FILE_BYTES + 10)),
    ]);
    assert.ok(tar.byteLength > 64 * 1024 * 1024);
    const c = await workspaceConfigFromArchive(tar);
    assert.equal(c.memory?.path, "AGENTS.md");
    assert.equal(c.memory?.content.length, MAX_CONFIG_FILE_BYTES);
  });

  it("detects the test command from the archive: vendored tests and symlinks do not count", async () => {
    const tar = await packWorkspace([
      file("tests/test_calc.py", "import unittest\n"),
      file(".venv/lib/python3/site-packages/x/test_vendored.py", ""),
      file("node_modules/y/test_z.py", ""),
      { path: "package.json", type: "symlink", mode: 0o777, linkname: "/etc/passwd" },
    ]);
    const c = await workspaceConfigFromArchive(tar);
    assert.equal(c.commands.test?.command, "python3 -m unittest discover -s tests");
    assert.equal(c.commands.lint, undefined);
    assert.deepEqual((await workspaceConfigFromArchive(undefined)).commands, {});
    assert.equal(c.detected.ecosystem, "python");
    assert.match(c.detected.reason, /tests\/test_calc\.py/);
  });

  it("the image inputs: .agent/config.yaml image: and the detected ecosystem", async () => {
    const tar = await packWorkspace([
      file(".agent/config.yaml", "image: rust\n"),
      file("go.mod", "module m\n"),
      { path: "Cargo.toml", type: "symlink", mode: 0o777, linkname: "/etc/passwd" },
    ]);
    const c = await workspaceConfigFromArchive(tar);
    assert.equal(c.image, "rust");
    assert.deepEqual(c.ecosystemImage, { ecosystem: "rust" });
    assert.deepEqual(c.detected, { ecosystem: "go", reason: "go.mod (test command: go)" });
    const bad = await workspaceConfigFromArchive(
      await packWorkspace([file(".agent/config.yaml", "image: node:24\n")]),
    );
    assert.equal(bad.image, "node:24", "a reference is the run's own image (requested-image.ts)");
    assert.deepEqual(bad.ecosystemImage, {}, "…and no ecosystem");
    const typo = await workspaceConfigFromArchive(
      await packWorkspace([file(".agent/config.yaml", "image: pyhton\n")]),
    );
    assert.ok(
      "problem" in typo.ecosystemImage && /unknown ecosystem/.test(typo.ecosystemImage.problem),
    );
  });
});

describe("setup inputs", () => {
  it("hashes each root-level setup input over its whole content, past the 64 KiB cap", async () => {
    const { createHash } = await import("node:crypto");
    const big = Buffer.alloc(200 * 1024, "x");
    const tar = await packWorkspace([
      { path: "package-lock.json", type: "file", mode: 0o644, data: big },
      { path: "package.json", type: "file", mode: 0o644, data: Buffer.from("{}") },
      { path: "sub/package-lock.json", type: "file", mode: 0o644, data: Buffer.from("{}") },
    ]);
    const c = await workspaceConfigFromArchive(tar);
    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    assert.deepEqual([...c.setupInputs.entries()].sort(), [
      ["package-lock.json", sha(big)],
      ["package.json", sha(Buffer.from("{}"))],
    ]);
    assert.equal(c.commands.setup?.command, "npm ci");
  });
});

describe("workspaceConfigFromArchive: streamed from the store", () => {
  /** `tar` in chunks of `size` bytes, as the artifact store reads it. */
  const source = (tar: Buffer, size = 7) => ({
    size: tar.length,
    async *open() {
      for (let i = 0; i < tar.length; i += size) yield tar.subarray(i, i + size);
    },
  });

  it("reads the same configuration as from the archive in memory, in small chunks", async () => {
    const tar = await packWorkspace([
      file(".agent/skills/alpha/SKILL.md", "alpha"),
      file("AGENTS.md", "notes"),
      file("package.json", '{"scripts":{"test":"node --test"}}'),
      file("data/big.bin", Buffer.alloc(3 * MAX_CONFIG_FILE_BYTES, 1)),
      file("tests/test_a.py", "def test_a(): pass\n"),
    ]);
    const streamed = await workspaceConfigFromArchive(source(tar));
    assert.deepEqual(streamed, await workspaceConfigFromArchive(tar));
    assert.deepEqual(streamed.memory, { path: "AGENTS.md", content: "notes" });
    assert.deepEqual(await workspaceConfigFromArchive(source(Buffer.alloc(0))), {
      ...(await workspaceConfigFromArchive(undefined)),
    });
  });

  it("a read that fails part way fails the configuration with its error", async () => {
    const tar = await packWorkspace([file("AGENTS.md", "notes"), file("b.txt", "b")]);
    const failing = {
      size: tar.length,
      async *open() {
        yield tar.subarray(0, 600);
        throw new Error("store read failed");
      },
    };
    await assert.rejects(workspaceConfigFromArchive(failing), /store read failed/);
  });
});
