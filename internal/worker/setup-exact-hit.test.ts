/**
 * The exact-hit decision: a restored archive answers the setup only when it was saved under
 * exactly this run's key (tenant, image build, setup line, every input's digest), the image
 * is named by a build id, the line's outcome is all in the archive, and npm's tree came back.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SetupSpec } from "../tools/command-spec.ts";
import { detectSetup } from "../tools/setup-detect.ts";
import { type CacheKeyInput, cacheKey } from "./cache-key.ts";
import { exactHit } from "./setup-exact-hit.ts";

const ID = `sha256:${"a".repeat(64)}`;
const npm = detectSetup(new Map([["package-lock.json", Buffer.from("{}")]])) as SetupSpec;
const run: CacheKeyInput = {
  tenant: "acme",
  image: `agentd-sandbox-node:latest@${ID}`,
  setup: npm,
  inputs: new Map([
    ["package.json", "1".repeat(64)],
    ["package-lock.json", "2".repeat(64)],
  ]),
};
const keyOf = (i: CacheKeyInput) => cacheKey(i)?.key ?? "";
const saved = keyOf(run);

describe("exactHit", () => {
  it("the same key, a build id, a line whose outcome is in the archive, npm's tree back: exact", () => {
    assert.equal(exactHit({ restoredKey: saved, run, installedTree: true }), true);
    const bareId = { ...run, image: ID };
    assert.equal(exactHit({ restoredKey: keyOf(bareId), run: bareId, installedTree: true }), true);
  });

  it("an archive saved under another key is not exact: a differing input digest, setup line, image id or tenant", () => {
    const other: CacheKeyInput[] = [
      { ...run, inputs: new Map([...run.inputs, ["package.json", "3".repeat(64)]]) },
      { ...run, inputs: new Map([...run.inputs, [".npmrc", "4".repeat(64)]]) },
      { ...run, setup: { ...npm, command: "npm ci --ignore-scripts" } },
      { ...run, image: `agentd-sandbox-node:latest@sha256:${"b".repeat(64)}` },
      { ...run, tenant: "other" },
    ];
    for (const o of other) {
      assert.notEqual(keyOf(o), saved);
      assert.equal(exactHit({ restoredKey: saved, run: o, installedTree: true }), false);
      // The other way round too: this run restoring what the other saved.
      assert.equal(exactHit({ restoredKey: keyOf(o), run, installedTree: true }), false);
    }
  });

  it("an image named by a tag alone (no build id) is never exact, even under the same key", () => {
    for (const image of [
      "agentd-sandbox-node:latest",
      "sha256:short",
      `x@sha256:${"A".repeat(64)}`,
    ]) {
      const tagged = { ...run, image };
      assert.equal(
        exactHit({ restoredKey: keyOf(tagged), run: tagged, installedTree: true }),
        false,
      );
    }
  });

  it("a line not marked outcomeInCache (configured, policy's, pip -e, yarn berry…) is never exact", () => {
    const lines: SetupSpec[] = [
      {
        command: "npm ci",
        source: "policy tools.setup",
        ecosystem: "npm",
        lockfile: "package-lock.json",
      },
      detectSetup(new Map([["pyproject.toml", Buffer.from("")]])) as SetupSpec,
      detectSetup(new Map([["yarn.lock", Buffer.from("__metadata:\n")]])) as SetupSpec,
    ];
    for (const setup of lines) {
      const r = {
        ...run,
        setup,
        inputs: new Map([...run.inputs, [setup.lockfile, "5".repeat(64)]]),
      };
      assert.equal(
        exactHit({ restoredKey: keyOf(r), run: r, installedTree: true }),
        false,
        setup.command,
      );
    }
  });

  it("npm without its installed tree in the archive is not exact", () => {
    assert.equal(exactHit({ restoredKey: saved, run, installedTree: false }), false);
  });

  it("hostile restored keys are not exact", () => {
    for (const k of ["", saved.toUpperCase(), `${saved} `, saved.slice(1)])
      assert.equal(exactHit({ restoredKey: k, run, installedTree: true }), false);
  });
});
