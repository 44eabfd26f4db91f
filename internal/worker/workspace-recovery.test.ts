/**
 * planRecovery, pure: which calls since the restore point are re-applied, which are lost,
 * which are nothing to restore. The re-application itself runs against real containers in
 * sandbox-lost.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  ArtifactEmittedSchema,
  type Event,
  EventSchema,
  SandboxLostSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { SNAPSHOT } from "./run-artifacts.ts";
import { planRecovery } from "./workspace-recovery.ts";

function log(...payloads: Event["payload"][]): Event[] {
  return payloads.map((payload, i) => create(EventSchema, { seq: BigInt(i + 1), payload }));
}
const call = (callId: string, tool: string, input: unknown): Event["payload"] => ({
  case: "toolCall",
  value: create(ToolCallSchema, { callId, tool, inputJson: JSON.stringify(input) }),
});
const ok = (callId: string, outputJson = "{}"): Event["payload"] => ({
  case: "toolResult",
  value: create(ToolResultSchema, { callId, ok: true, outputJson }),
});
const failed = (callId: string): Event["payload"] => ({
  case: "toolResult",
  value: create(ToolResultSchema, { callId, ok: false, error: { code: "EIO", message: "x" } }),
});
const snapshot: Event["payload"] = {
  case: "artifactEmitted",
  value: create(ArtifactEmittedSchema, { name: SNAPSHOT, digest: "d" }),
};
const patch = { path: "a.txt", edits: [{ oldText: "a", newText: "b" }] };

describe("planRecovery", () => {
  it("from the upload: patches to re-apply and writing commands lost, in log order; reads and failed calls left out", () => {
    const plan = planRecovery(
      log(
        call("c1", "repo.patch", patch),
        ok("c1"),
        call("c2", "process.run", { command: "echo x > b.txt" }),
        ok("c2"),
        call("c3", "process.run", { command: "cat b.txt" }),
        ok("c3"),
        call("c4", "repo.read", { path: "a.txt" }),
        ok("c4"),
        call("c5", "process.run", { command: "echo y > c.txt" }),
        failed("c5"),
        call("c6", "test.run", {}),
        ok("c6"),
        call("setup_1", "setup.run", {}),
        ok("setup_1"),
      ),
    );
    assert.equal(plan.restoredFromSeq, 0);
    assert.deepEqual(
      plan.patches.map((p) => p.callId),
      ["c1"],
    );
    assert.deepEqual(
      plan.lost.map((l) => [l.callId, l.tool]),
      [
        ["c2", "process.run"],
        ["c6", "test.run"],
      ],
    );
  });

  it("from the last snapshot: only what came after it counts", () => {
    const events = log(
      call("c1", "process.run", { command: "echo x > b.txt" }),
      ok("c1"),
      snapshot,
      call("c2", "repo.patch", patch),
      ok("c2"),
      call("c3", "process.run", { command: "touch d" }),
      ok("c3"),
    );
    const plan = planRecovery(events);
    assert.equal(plan.restoredFromSeq, 3);
    assert.deepEqual(
      plan.patches.map((p) => p.callId),
      ["c2"],
    );
    assert.deepEqual(
      plan.lost.map((l) => l.callId),
      ["c3"],
    );
  });

  it("a second loss re-applies the patches again but does not list calls an earlier sandbox.lost already lost", () => {
    const plan = planRecovery(
      log(
        call("c1", "repo.patch", patch),
        ok("c1"),
        call("c2", "process.run", { command: "echo x > b.txt" }),
        ok("c2"),
        {
          case: "sandboxLost",
          value: create(SandboxLostSchema, { lostCallIds: ["c2"], reappliedCallIds: ["c1"] }),
        },
        call("c3", "process.run", { command: "echo z > z.txt" }),
        ok("c3"),
      ),
    );
    assert.deepEqual(
      plan.patches.map((p) => p.callId),
      ["c1"],
    );
    assert.deepEqual(
      plan.lost.map((l) => l.callId),
      ["c3"],
    );
  });

  it("hostile logs: a result without its call, an unparsable input, a paused run's resume", () => {
    const plan = planRecovery(
      log(
        ok("ghost"),
        {
          case: "toolCall",
          value: create(ToolCallSchema, {
            callId: "c1",
            tool: "process.run",
            inputJson: "{not json",
          }),
        },
        ok("c1"),
      ),
    );
    assert.deepEqual(plan.patches, []);
    // An input that cannot be read is taken as a write: listed lost, never skipped.
    assert.deepEqual(
      plan.lost.map((l) => l.callId),
      ["c1"],
    );
    const paused = planRecovery(log(call("c1", "repo.patch", patch), ok("c1"), snapshot));
    assert.deepEqual([paused.patches.length, paused.lost.length], [0, 0]);
  });
});
