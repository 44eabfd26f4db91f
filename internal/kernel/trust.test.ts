/** Trust counters folded from events: what counts as a success, a failure, a revert. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { type EventPayload, LoggedEvent, sealEvent } from "../eventlog/event-codec.ts";
import {
  ApprovalRequestedSchema,
  ApprovalResolvedSchema,
  type Event,
  EventSchema,
  PolicyDecisionSchema,
  ToolCallSchema,
  ToolOutputSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { foldTrust, TRUST_EVENT_TYPES } from "./trust.ts";

const call = (id: string, tool: string): Event =>
  create(EventSchema, {
    payload: { case: "toolCall", value: create(ToolCallSchema, { callId: id, tool }) },
  });
const result = (id: string, ok: boolean, outputJson = "", code = ""): Event =>
  create(EventSchema, {
    payload: {
      case: "toolResult",
      value: create(ToolResultSchema, {
        callId: id,
        ok,
        outputJson,
        ...(code === "" ? {} : { error: { code, message: "x" } }),
      }),
    },
  });
const patchOut = (diff: string, previewed: boolean): string => {
  const r = { path: "a.ts", diff };
  return JSON.stringify(previewed ? { preview: { summary: "p" }, result: r } : r);
};

describe("foldTrust", () => {
  it("sees a revert whether the patch ran previewed ({preview, result}) or not", () => {
    const fwd = "--- a/a.ts\n+++ b/a.ts\n@@ -1 +1 @@\n-one\n+two\n";
    const back = "--- a/a.ts\n+++ b/a.ts\n@@ -1 +1 @@\n-two\n+one\n";
    for (const previewed of [false, true]) {
      const c = foldTrust({}, [
        call("p1", "repo.patch"),
        result("p1", true, patchOut(fwd, previewed)),
        call("p2", "repo.patch"),
        result("p2", true, patchOut(back, previewed)),
      ]);
      assert.equal(c["repo.patch"]?.revertedPatches, 1, `previewed: ${previewed}`);
      assert.equal(c["repo.patch"]?.successfulCalls, 2);
    }
  });

  it("does not count refusals, invalid input, interruptions or cancellations as failures", () => {
    const c = foldTrust({}, [
      ...["EPOLICY", "EVALIDATION", "interrupted", "cancelled", "EAPPROVAL_DENIED"].flatMap(
        (code, i) => [call(`c${i}`, "process.run"), result(`c${i}`, false, "", code)],
      ),
      call("f", "process.run"),
      result("f", false, "", "EIO"),
    ]);
    assert.equal(c["process.run"]?.failedCalls, 1);
    assert.equal(c["process.run"]?.successfulCalls ?? 0, 0);
  });
});

describe("TRUST_EVENT_TYPES", () => {
  it("skipping every other type (read without decoding) folds the same counters", () => {
    const payloads: EventPayload[] = [
      { case: "toolCall", value: create(ToolCallSchema, { callId: "a", tool: "repo.patch" }) },
      { case: "policyDecision", value: create(PolicyDecisionSchema, { callId: "a" }) },
      {
        case: "approvalRequested",
        value: create(ApprovalRequestedSchema, { approvalId: "ap", tool: "repo.patch" }),
      },
      {
        case: "approvalResolved",
        value: create(ApprovalResolvedSchema, { approvalId: "ap", decision: 2, resolvedBy: "u" }),
      },
      { case: "toolOutput", value: create(ToolOutputSchema, { callId: "b", chunk: "x" }) },
      { case: "toolCall", value: create(ToolCallSchema, { callId: "b", tool: "process.run" }) },
      { case: "toolResult", value: create(ToolResultSchema, { callId: "b", ok: true }) },
    ];
    const logged = payloads.map((payload, i) => {
      const sealed = sealEvent({ runId: "r", sessionId: "s", payload }, i + 1, "", 1_000);
      return new LoggedEvent("r", i + 1, sealed.json);
    });
    const types = logged.map((e) => e.type); // read before anything was decoded
    assert.deepEqual(
      types,
      logged.map((e) => e.event.type),
    );
    const all = foldTrust(
      {},
      logged.map((e) => e.event),
    );
    const some = foldTrust(
      {},
      logged.filter((e) => TRUST_EVENT_TYPES.has(e.type)).map((e) => e.event),
    );
    assert.deepEqual(some, all);
    assert.equal(all["repo.patch"]?.manualOverrides, 1);
    assert.equal(all["process.run"]?.successfulCalls, 1);
  });
});
