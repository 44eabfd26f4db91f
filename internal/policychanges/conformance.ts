/**
 * The conformance suite every PolicyChangeStore passes (stores.test.ts runs it on Redis
 * and on the file store): propose is idempotent, listing is tenant-scoped and newest first,
 * of racing settlements exactly one wins, and what was acknowledged survives a restart.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { PolicyChangeStore, StoredPolicyChange } from "./port.ts";

export interface ConformanceHarness {
  open(): Promise<PolicyChangeStore>;
  /** Other handles on the same data (other servers). */
  others(n: number): Promise<PolicyChangeStore[]>;
  /** Restarts the backing store (hard) and answers a new handle on it. */
  reopen(): Promise<PolicyChangeStore>;
  cleanup(): Promise<void>;
}

let n = 0;
export function sampleChange(over: Partial<StoredPolicyChange> = {}): StoredPolicyChange {
  n++;
  return {
    id: `pc_${n.toString(16).padStart(20, "0")}`,
    tenantId: "acme",
    state: "pending",
    rule: { kind: "command", command: "npm test", repo: "web" },
    proposedBy: "alice",
    approvalId: `apr_r${n}_c1`,
    runId: `r${n}`,
    callId: "c1",
    path: "/etc/agentd/acme.yaml",
    needsTenantFile: false,
    diff: "--- a\n+++ b\n",
    baseSha256: "0".repeat(64),
    newText: "version: 1\n",
    proposedAt: 1_000 + n,
    ...over,
  };
}

export function runPolicyChangeConformance(name: string, h: ConformanceHarness): void {
  describe(`PolicyChangeStore conformance (${name})`, () => {
    after(() => h.cleanup());

    it("proposes once: the same id again answers the stored change unchanged", async () => {
      const s = await h.open();
      const c = sampleChange();
      assert.deepEqual(await s.propose(c), c);
      const again = await s.propose({ ...c, proposedBy: "mallory", newText: "x" });
      assert.equal(again.proposedBy, "alice");
      assert.equal(again.newText, "version: 1\n");
      assert.deepEqual(await s.get(c.id), c);
      assert.equal(await s.get("pc_ffffffffffffffffffff"), undefined);
    });

    it("lists one tenant's changes (newest first), or all of them", async () => {
      const s = await h.open();
      const a1 = await s.propose(sampleChange({ tenantId: "t-list-a", proposedAt: 5_000 }));
      const b1 = await s.propose(sampleChange({ tenantId: "t-list-b", proposedAt: 5_001 }));
      const a2 = await s.propose(sampleChange({ tenantId: "t-list-a", proposedAt: 5_002 }));
      assert.deepEqual(
        (await s.list("t-list-a")).map((c) => c.id),
        [a2.id, a1.id],
      );
      assert.deepEqual(
        (await s.list("t-list-b")).map((c) => c.id),
        [b1.id],
      );
      const all = (await s.list(undefined)).map((c) => c.id);
      for (const id of [a1.id, a2.id, b1.id]) assert.ok(all.includes(id), id);
    });

    it("settles exactly once, whoever races", async () => {
      const s = await h.open();
      const c = await s.propose(sampleChange());
      const handles = [s, ...(await h.others(3))];
      const results = await Promise.all(
        handles.map((x, i) => x.settle(c.id, { state: "applied", by: `admin${i}`, at: 9_000 + i })),
      );
      const won = results.filter((r) => r !== undefined);
      assert.equal(won.length, 1, JSON.stringify(results));
      const stored = await s.get(c.id);
      assert.equal(stored?.state, "applied");
      assert.equal(stored?.settledBy, won[0]?.settledBy);
      assert.equal(await s.settle(c.id, { state: "rejected", by: "late", at: 9_999 }), undefined);
    });

    it("reopens only the settlement it names", async () => {
      const s = await h.open();
      const c = await s.propose(sampleChange());
      const how = { state: "applied" as const, by: "root", at: 7_000, newDigest: "d" };
      assert.ok(await s.settle(c.id, how));
      assert.equal(await s.reopen(c.id, { ...how, at: 7_001 }), false);
      assert.equal(await s.reopen(c.id, how), true);
      const back = await s.get(c.id);
      assert.equal(back?.state, "pending");
      assert.equal(back?.settledBy, undefined);
      assert.equal(back?.newDigest, undefined);
    });

    it("drops one tenant's changes, whatever their state, and no other's; across a restart too", async () => {
      const s = await h.open();
      const gone = [
        await s.propose(sampleChange({ tenantId: "t-drop" })),
        await s.propose(sampleChange({ tenantId: "t-drop" })),
      ];
      await s.settle(gone[0]?.id ?? "", { state: "rejected", by: "root", at: 7_000 });
      const kept = await s.propose(sampleChange({ tenantId: "t-drop-other" }));
      assert.equal(await s.dropTenant("t-drop"), 2);
      assert.deepEqual(await s.list("t-drop"), []);
      for (const c of gone) assert.equal(await s.get(c.id), undefined);
      assert.ok(!(await s.list(undefined)).some((c) => c.tenantId === "t-drop"));
      assert.deepEqual(await s.get(kept.id), kept);
      assert.equal(await s.dropTenant("t-drop"), 0, "idempotent");
      const r = await h.reopen();
      assert.deepEqual(await r.list("t-drop"), []);
      assert.deepEqual(await r.get(kept.id), kept);
    });

    it("keeps every acknowledged change across a restart", async () => {
      const s = await h.open();
      const c = await s.propose(sampleChange({ tenantId: "t-restart" }));
      const d = await s.propose(sampleChange({ tenantId: "t-restart" }));
      await s.settle(d.id, { state: "rejected", by: "root", at: 8_000, reason: "too wide" });
      const r = await h.reopen();
      assert.deepEqual(await r.get(c.id), c);
      const back = await r.get(d.id);
      assert.equal(back?.state, "rejected");
      assert.equal(back?.reason, "too wide");
      assert.equal((await r.list("t-restart")).length, 2);
    });
  });
}
