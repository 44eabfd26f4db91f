/** observeEvent: sandbox.lost counted by outcome (the only label: no ids, no call names). */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { SandboxLostSchema } from "../gen/agentd/v1/events_pb.js";
import { observeEvent } from "./event-metrics.ts";
import { metrics } from "./metrics.ts";

async function counts(): Promise<Record<string, number>> {
  const got = await metrics.sandboxesLost.get();
  return Object.fromEntries(got.values.map((v) => [String(v.labels.outcome), v.value]));
}

it("sandbox.lost is counted restored, lost or failed", async () => {
  const before = await counts();
  const lost = (v: Parameters<typeof create<typeof SandboxLostSchema>>[1]) =>
    observeEvent({ case: "sandboxLost", value: create(SandboxLostSchema, v) });
  lost({ reappliedCallIds: ["c1"] });
  lost({ lostCallIds: ["c2"] });
  lost({ lostCallIds: ["c2"], failsRun: true });
  lost({ lostCallIds: ["c3"], failsRun: true });
  const after = await counts();
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  assert.deepEqual([delta("restored"), delta("lost"), delta("failed")], [1, 1, 2]);
  const labels = (await metrics.sandboxesLost.get()).values.flatMap((v) => Object.keys(v.labels));
  assert.deepEqual([...new Set(labels)], ["outcome"]);
});
