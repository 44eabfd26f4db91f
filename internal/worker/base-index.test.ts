/** The kernel's index of the upload, streamed: the same index as from the files in memory. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { indexWorkspace } from "../kernel/script-probe.ts";
import {
  packWorkspace,
  readWorkspaceArchive,
  SANDBOX_EXPORT_LIMITS,
  type WorkspaceFile,
} from "../sandbox/workspace-archive.ts";
import { indexBaseArchive } from "./base-index.ts";

const source = (tar: Buffer) => ({
  size: tar.length,
  async *open() {
    for (let i = 0; i < tar.length; i += 1000) yield tar.subarray(i, i + 1000);
  },
});

describe("indexBaseArchive", () => {
  it("indexes files (sha256, executable), directories and symlinks as indexWorkspace does", async () => {
    const files: WorkspaceFile[] = [
      { path: "bin", type: "directory", mode: 0o755 },
      { path: "bin/run.sh", type: "file", mode: 0o755, data: Buffer.from("#!/bin/sh\necho hi\n") },
      { path: "src/a.js", type: "file", mode: 0o644, data: Buffer.alloc(5000, 3) },
      { path: "run", type: "symlink", mode: 0o777, linkname: "bin/run.sh" },
    ];
    const tar = await packWorkspace(files);
    const streamed = await indexBaseArchive(source(tar));
    assert.deepEqual(
      streamed,
      indexWorkspace(await readWorkspaceArchive(tar, SANDBOX_EXPORT_LIMITS)),
    );
    assert.equal(streamed.get("bin/run.sh")?.executable, true);
  });

  it("no upload: an empty index; a corrupt one: refused naming workspace_tar", async () => {
    assert.equal((await indexBaseArchive(undefined)).size, 0);
    await assert.rejects(
      indexBaseArchive(source(Buffer.from("not a tar".repeat(200)))),
      /workspace_tar/,
    );
  });
});
