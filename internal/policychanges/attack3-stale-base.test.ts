/**
 * Attack: a pending rule re-grants what the base policy has since taken away.
 *
 * A tenant's file `extends` a shared base and holds no approvedCommands of its own. A person
 * approves `npm test` with --rule command; the proposal copies the list the tenant inherits
 * (the base's `npm publish`@web) into the tenant's file before adding `npm test`
 * (policy-edit.ts editPolicy: "a list replaces its base's whole"). The platform team then
 * removes `npm publish` from the base — a tightening every tenant should get. Later an admin
 * applies the pending change.
 *
 * Why it gets through: apply.ts applyChange() checks only that the tenant's own file bytes
 * are unchanged (baseSha256) and that the stored newText loads; it never checks that the
 * result is the policy in force plus the one entry (propose.ts/policy-edit.ts check that
 * only when proposing). The base changed, the tenant file did not, so the stale copy of the
 * base's old list is written: `npm publish` is allowed again for the tenant, with no one
 * having asked for it and the diff the admin saw not saying so.
 *
 * What must hold (docs/policy.md "Rules from approvals"): applying adds exactly the one
 * proposed entry to the policy in force, or is refused as stale.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import { applyChange } from "./apply.ts";
import type { PolicyChangesDeps } from "./deps.ts";
import { FilePolicyChangeStore } from "./file-store.ts";
import { prepareChange, storeChange } from "./propose.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "agentd-attack3-stale-base-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const baseWith = (entries: string[]) =>
  [
    "version: 1",
    `extends: ${join(ROOT, "policy.yaml")}`,
    entries.length === 0 ? "approvedCommands: []" : "approvedCommands:",
    ...entries.flatMap((c) => [`  - command: ${c}`, "    repo: web"]),
  ].join("\n");

function load(path: string) {
  const r = readPolicyFile(path);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
}

describe("attack3: applying a change after its base policy was tightened", () => {
  it("does not bring back an entry the base removed since the proposal", async () => {
    const base = join(dir, "base.yaml");
    const tenant = join(dir, "acme.yaml");
    writeFileSync(base, baseWith(["npm publish"]));
    writeFileSync(tenant, ["version: 1", "extends: base.yaml", ""].join("\n"));
    const deps: PolicyChangesDeps = {
      store: new FilePolicyChangeStore(),
      chosen: () => ({ policy: load(tenant), source: "tenant", path: tenant }),
      reload: () => {},
      publish: async () => {},
    };
    const change = await storeChange(
      deps,
      await prepareChange(deps, {
        tenantId: "acme",
        rule: { kind: "command", command: "npm test", repo: "web" },
        proposedBy: "alice",
        approvalId: "apr_01JD0000000000000000000000_c1",
        runId: "01JD0000000000000000000000",
        callId: "c1",
      }),
    );
    // The platform team takes `npm publish` away from every tenant.
    writeFileSync(base, baseWith([]));
    assert.deepEqual(load(tenant).approvedCommands, [], "the tenant inherits no rule now");

    let refused: unknown;
    try {
      await applyChange(deps, change.id, "root");
    } catch (err) {
      refused = err;
    }
    const now = load(tenant).approvedCommands.map((r) => `${r.command}@${r.repo}`);
    assert.equal(
      now.includes("npm publish@web"),
      false,
      `after apply (${refused === undefined ? "applied" : `refused: ${(refused as Error).message}`}) the tenant's file grants ${JSON.stringify(now)}:\n${readFileSync(tenant, "utf8")}`,
    );
  });
});
