/** Trust counters folded from events: what counts as a success, a failure, a revert. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  type Event,
  EventSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { foldTrust } from "./trust.ts";

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
