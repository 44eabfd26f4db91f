/** CreateRun's tenant gate: refusals name the limit and carry RetryInfo; others pass. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { Code } from "@connectrpc/connect";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { MemoryRunRate } from "../tenancy/run-rate.ts";
import { holdReason } from "./hold-reason.ts";
import { createTenantGate } from "./tenant-gate.ts";

const NOW = Date.UTC(2026, 10, 28, 23, 0, 30);

it("runsPerMinute: the limit's runs pass, the next is RESOURCE_EXHAUSTED with RetryInfo to the next minute", async () => {
  const gate = createTenantGate({
    daySpent: async () => undefined,
    runsPerMinute: (t) => (t === "acme" ? 2 : undefined),
    rate: new MemoryRunRate(),
    now: () => NOW,
  });
  assert.equal(await gate("acme"), undefined);
  assert.equal(await gate("acme"), undefined);
  const e = await gate("acme");
  assert.equal(e?.code, Code.ResourceExhausted);
  assert.match(e?.rawMessage ?? "", /tenants\.acme\.limits\.runsPerMinute/);
  const [info] = e?.findDetails(RetryInfoSchema) ?? [];
  assert.equal(info?.retryDelay?.seconds, 30n);
  for (let i = 0; i < 5; i++) assert.equal(await gate("other"), undefined, "no limit: no refusal");
});

it("a spent day is refused first, with RetryInfo to the next UTC midnight, and takes no run of the minute", async () => {
  const rate = new MemoryRunRate();
  let spent = true;
  const gate = createTenantGate({
    daySpent: async (t) =>
      spent
        ? { limit: "tokensPerDay", code: "ELIMIT_TOKENS", message: `tenant ${t} used it` }
        : undefined,
    runsPerMinute: () => 1,
    rate,
    now: () => NOW,
  });
  const e = await gate("acme");
  assert.equal(e?.code, Code.ResourceExhausted);
  assert.match(e?.rawMessage ?? "", /next UTC day/);
  assert.equal(e?.findDetails(RetryInfoSchema)[0]?.retryDelay?.seconds, 3570n);
  spent = false;
  assert.equal(await gate("acme"), undefined, "the refused run did not use the minute's one run");
});

it("hold reasons name the limit that holds a run, and nothing for a ready run", () => {
  assert.equal(holdReason(undefined, "acme", { limit: 1, source: "tenant" }), undefined);
  assert.equal(holdReason("session", "acme", undefined)?.heldBy, "session");
  const t = holdReason("tenant", "acme", { limit: 1, source: "tenant" });
  assert.equal(t?.heldBy, "tenant.concurrentRuns");
  assert.match(t?.heldMessage ?? "", /1 concurrent run .*tenants\.acme\.limits\.concurrentRuns/);
  const s = holdReason("tenant", "acme", { limit: 10, source: "server" });
  assert.equal(s?.heldBy, "server.tenantLimit");
  assert.match(s?.heldMessage ?? "", /10 concurrent runs .*--tenant-limit/);
});
