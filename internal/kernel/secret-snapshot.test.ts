/** Unit tests of which snapshot entries a run's taint leaves out (secret-snapshot.ts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { nameKey } from "./held-names.ts";
import { heldEntryFilter } from "./secret-snapshot.ts";
import type { TaintedFile } from "./secret-taint.ts";

const t = (...paths: string[]): Map<string, TaintedFile> =>
  new Map(paths.map((path) => [path, { path, digest: "file:x", before: "", callId: "c1" }]));

const KEY = nameKey(new Uint8Array(32).fill(7));

describe("heldEntryFilter", () => {
  it("leaves out a held path and everything under a held directory, keeps the rest", () => {
    const out = heldEntryFilter(t("/workspace/a.txt", "/workspace/keys"), KEY);
    assert.equal(out({ path: "a.txt", type: "file" }), true);
    assert.equal(out({ path: "keys", type: "directory" }), true);
    assert.equal(out({ path: "keys/deep/k", type: "file" }), true);
    assert.equal(out({ path: "keysx", type: "file" }), false, "a sibling sharing a prefix");
    assert.equal(out({ path: "b.txt", type: "file" }), false);
  });
  it("leaves out a hard link to an entry it left out, whatever its own name", () => {
    const out = heldEntryFilter(t("/workspace/a.txt"), KEY);
    assert.equal(out({ path: "a.txt", type: "file" }), true);
    assert.equal(out({ path: "copy", type: "link", linkname: "a.txt" }), true);
    assert.equal(out({ path: "copy2", type: "link", linkname: "copy" }), true, "a chain");
    assert.equal(out({ path: "other", type: "link", linkname: "b.txt" }), false);
    assert.equal(
      out({ path: "sym", type: "symlink", linkname: "a.txt" }),
      false,
      "a symlink holds only its target's name",
    );
  });
  it("leaves out the whole workspace when /workspace itself is held; ignores other roots", () => {
    assert.equal(heldEntryFilter(t("/workspace"), KEY)({ path: "x/y", type: "file" }), true);
    const other = heldEntryFilter(t("/tmp/x", "container:"), KEY);
    assert.equal(other({ path: "tmp/x", type: "file" }), false);
  });
});
