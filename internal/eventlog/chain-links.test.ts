/**
 * chain-links.ts reads `hash` and `prevHash` out of stored JSON by pattern: for an event of
 * every payload case (a new case whose name sorted between "eventId" and "hash" would break
 * it, and this test), and with payload text that imitates the members, it finds the real ones.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EventSchema, OutputDeltaSchema } from "../gen/agentd/v1/events_pb.js";
import { hashOf, prevHashOf } from "./chain-links.ts";
import { type EventPayload, sealEvent } from "./event-codec.ts";

const PREV = "ab".repeat(32);

it("finds the envelope's hash and prevHash for every payload case", () => {
  const oneof = EventSchema.oneofs.find((o) => o.localName === "payload");
  assert.ok(oneof !== undefined);
  for (const f of oneof.fields) {
    if (f.message === undefined) continue;
    const payload = { case: f.localName, value: create(f.message) } as EventPayload;
    const s = sealEvent({ runId: "r", sessionId: "s", payload }, 7, PREV, 1_700_000_000_000);
    assert.equal(hashOf(s.json), s.hash, f.localName);
    assert.equal(prevHashOf(s.json), PREV, f.localName);
  }
});

it("text that imitates the members is not taken for them", () => {
  const fake = `","eventId":"01AAAAAAAAAAAAAAAAAAAAAAAA","hash":"${"c".repeat(64)}","prevHash":"${"d".repeat(64)}`;
  const payload: EventPayload = {
    case: "outputDelta",
    value: create(OutputDeltaSchema, { text: fake }),
  };
  const s = sealEvent({ runId: "r", sessionId: "s", payload }, 2, PREV, 1_700_000_000_000);
  assert.equal(hashOf(s.json), s.hash);
  assert.equal(prevHashOf(s.json), PREV);
  assert.equal(hashOf("{}"), undefined);
});
