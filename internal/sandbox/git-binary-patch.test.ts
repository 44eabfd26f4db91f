/**
 * Git binary patches against the real git: the literal hunk is the one `git diff --binary`
 * writes for the same bytes, and `git apply` recreates files of every line-length boundary.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { encodeBase85, formatBinaryLiteral } from "./git-binary-patch.ts";
import { blobId, NULL_BLOB_ID } from "./git-blob-id.ts";

function inRepo<T>(fn: (dir: string, git: (...args: string[]) => string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "agentd-binpatch-"));
  const git = (...args: string[]) =>
    execFileSync("git", args, {
      cwd: dir,
      encoding: "latin1",
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    });
  try {
    git("init", "-q");
    return fn(dir, git);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("git binary patches", () => {
  it("base85 as git's encode_85 (alphabet, big-endian groups, zero padding)", () => {
    assert.equal(encodeBase85(Buffer.alloc(0)), "");
    assert.equal(encodeBase85(Buffer.from([0, 0, 0, 0])), "00000");
    assert.equal(encodeBase85(Buffer.from([0xff, 0xff, 0xff, 0xff])), "|NsC0");
    assert.equal(encodeBase85(Buffer.from([0xff])), encodeBase85(Buffer.from([0xff, 0, 0, 0])));
  });

  it("blob ids are git's", () =>
    inRepo((dir, git) => {
      const data = randomBytes(1000);
      writeFileSync(join(dir, "f"), data);
      assert.equal(blobId(data), git("hash-object", "f").trim());
      writeFileSync(join(dir, "e"), "");
      assert.equal(blobId(Buffer.alloc(0)), git("hash-object", "e").trim());
    }));

  it("the literal hunk is byte for byte what git diff --binary writes", async () => {
    const data = Buffer.concat([Buffer.from([0]), randomBytes(777), Buffer.alloc(500, 7)]);
    const ours = await formatBinaryLiteral(data);
    const theirs = inRepo((dir, git) => {
      writeFileSync(join(dir, "f.bin"), data);
      git("add", "-N", "f.bin");
      // git deflates at core.compression; Node's default level is zlib's, 6.
      return git("-c", "core.compression=6", "diff", "--binary", "--full-index", "--", "f.bin");
    });
    assert.ok(theirs.includes(`index ${NULL_BLOB_ID}..${blobId(data)}\n${ours}`), theirs);
  });

  it("git apply recreates files of every size around the 4-byte groups and 52-byte lines", async () => {
    const sizes = [0, 1, 2, 3, 4, 5, 25, 26, 27, 51, 52, 53, 104, 105, 4096, 100_000];
    const files = sizes.map((n) => ({ name: `f${n}.bin`, data: randomBytes(n) }));
    let patch = "";
    for (const f of files) {
      patch += `diff --git a/${f.name} b/${f.name}\nnew file mode 100644\n`;
      patch += `index ${NULL_BLOB_ID}..${blobId(f.data)}\n${await formatBinaryLiteral(f.data)}`;
    }
    inRepo((dir, git) => {
      writeFileSync(join(dir, "p.diff"), patch);
      git("apply", "p.diff");
      for (const f of files) assert.deepEqual(readFileSync(join(dir, f.name)), f.data, f.name);
    });
  });
});
