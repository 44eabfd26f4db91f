/**
 * jest across a real pause (see restore-times.test.ts for the harness). jest's haste map
 * (in its cache directory, here .jest-cache in the workspace, so in the snapshot) keeps each
 * file's metadata keyed on its mtime, and its transform cache is beside it: restored with
 * mtime 0 everywhere, a same-size edit made before the pause could look unchanged to the
 * cache and jest would test the old module. jest comes from npm through the run's setup step
 * (`npm ci` from the pinned package-lock.json in testdata/jest-restore, with the npm preset).
 * Needs the Node sandbox image (agentd-sandbox-node:latest; `make images`) and the npm
 * registry; a missing image fails, never skips.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  edit,
  file,
  type PauseRestore,
  requireImage,
  sh,
  startPauseRestore,
  stdoutOf,
} from "../testing/pause-restore.ts";

const NODE_IMAGE = "agentd-sandbox-node:latest";
const FIXTURE = join(import.meta.dirname, "testdata", "jest-restore");
const JEST = "node_modules/.bin/jest --ci 2>&1";

let harness: PauseRestore;
before(async () => {
  await requireImage(NODE_IMAGE);
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

describe("a jest project restored after a pause (Node image)", () => {
  it("jest tests the module as it was edited (same size) before the pause", async () => {
    const results = await harness.run({
      image: NODE_IMAGE,
      network: "npm",
      files: [
        file("package.json", readFileSync(join(FIXTURE, "package.json"), "utf8")),
        file("package-lock.json", readFileSync(join(FIXTURE, "package-lock.json"), "utf8")),
        file("src/value.js", 'module.exports = "old";\n'),
        file(
          "test/value.test.js",
          'const value = require("../src/value.js");\ntest("value", () => {\n  expect(value).toBe("new");\n});\n',
        ),
      ],
      before: [sh("red", JEST), edit("edit", "src/value.js", '"old"', '"new"')],
      after: [sh("green", JEST)],
    });
    const red = results.get("red");
    assert.ok(red?.ok, red?.error);
    assert.equal(red.exitCode, 1, `jest failed before the edit: ${red.stdout}`);
    assert.match(red.stdout ?? "", /Received: "old"/, "jest ran the test and saw the old value");
    assert.ok(results.get("edit")?.ok);
    assert.match(stdoutOf(results, "green"), /1 passed/, "jest saw the edited module");
  });
});
