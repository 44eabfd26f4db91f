/** Unit tests of the shared cache's secret fence (cache-save-guard.ts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONTAINER_STATE, type TaintedFile } from "../kernel/secret-taint.ts";
import { cacheSaveRefusal } from "./cache-save-guard.ts";

const t = (...paths: string[]): Map<string, TaintedFile> =>
  new Map(paths.map((path) => [path, { path, digest: "file:x", before: "", callId: "c1" }]));
const ROOTS = ["/cache", "/workspace/node_modules"];

describe("cacheSaveRefusal", () => {
  it("allows a save only when the run holds nothing", () => {
    assert.equal(cacheSaveRefusal(undefined, ROOTS), undefined);
    assert.equal(cacheSaveRefusal(new Map(), ROOTS), undefined);
  });
  it("refuses a held path under any saved tree, not only /cache", () => {
    assert.match(
      cacheSaveRefusal(t("/workspace/node_modules/x/.tok"), ROOTS) ?? "",
      /\/workspace\/node_modules\/x\/\.tok.*\/workspace\/node_modules/,
    );
    assert.match(cacheSaveRefusal(t("/cache/npm/_cacache/x"), ROOTS) ?? "", /\/cache\/npm/);
  });
  it("refuses a held path above a saved tree (a failed scan holds /workspace whole)", () => {
    assert.match(cacheSaveRefusal(t("/workspace"), ROOTS) ?? "", /\/workspace,/);
  });
  it("refuses whatever else is held: a path elsewhere, the container's kernel state", () => {
    assert.match(cacheSaveRefusal(t("/tmp/x"), ROOTS) ?? "", /\/tmp\/x/);
    assert.match(cacheSaveRefusal(t(CONTAINER_STATE), ROOTS) ?? "", /exec that carried/);
    assert.notEqual(cacheSaveRefusal(t("/workspace/node_modulesx"), ["/cache"]), undefined);
  });
});
