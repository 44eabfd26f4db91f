/** Which link listings count as leading out of the workspace (workspace-links.ts). */
import assert from "node:assert/strict";
import { it } from "node:test";
import { anyLinkLeaves } from "./workspace-links.ts";

const list = (...pairs: [string, string][]) => pairs.map(([l, t]) => `${l}\0${t}\0`).join("");

it("a link whose target, resolved against its directory, stays in /workspace does not lead out", () => {
  assert.equal(anyLinkLeaves(""), false);
  assert.equal(
    anyLinkLeaves(
      list(
        ["/workspace/node_modules/.bin/tsc", "../typescript/bin/tsc"],
        ["/workspace/a", "/workspace/b"],
        ["/workspace/x", "."],
      ),
    ),
    false,
  );
});

it("one hop out is enough, however it ends (/tmp, .., the root itself)", () => {
  assert.equal(anyLinkLeaves(list(["/workspace/L", "/tmp/d/x"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/d/L", "../../tmp/x"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/L", "/"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/L", "/workspacex/y"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/a", "b"], [".ignore", "/tmp/ign"])), true);
});

it("a listing it cannot pair (cut, odd) counts as leading out", () => {
  assert.equal(anyLinkLeaves("/workspace/a\0b"), true);
  assert.equal(anyLinkLeaves("/workspace/a\0b\0/workspace/c\0"), true);
});

it("a `..` after a component that is itself a link climbs from where that link leads", () => {
  // s → . makes s/.. the root, though `s/../tmp/ign` is lexically /workspace/tmp/ign.
  assert.equal(
    anyLinkLeaves(list(["/workspace/s", "."], ["/workspace/.ignore", "s/../tmp/ign"])),
    true,
  );
  // The same through a chain of links and from a subdirectory.
  assert.equal(
    anyLinkLeaves(
      list(
        ["/workspace/a/up", "../b"],
        ["/workspace/b", "c"],
        ["/workspace/c", "."],
        ["/workspace/a/x", "up/../../etc"],
      ),
    ),
    true,
  );
  // A link leading into a subdirectory, then `..`: physically still inside.
  assert.equal(anyLinkLeaves(list(["/workspace/d", "a/b"], ["/workspace/e", "d/../x"])), false);
});

it("a loop of links or a link path that is not plain counts as leading out", () => {
  assert.equal(anyLinkLeaves(list(["/workspace/a", "b"], ["/workspace/b", "a"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/a", "a/x"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace/../tmp/a", "b"])), true);
  assert.equal(anyLinkLeaves(list(["/workspace//a", "b"])), true);
});
