import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { OutputDeltaSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { canonicalJson } from "./canonical-json.ts";
import { type SealedEvent, sealEvent } from "./event-codec.ts";
import { GENESIS_HASH, verifyChain } from "./hash-chain.ts";

function chain(n: number): SealedEvent[] {
  const out: SealedEvent[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const payload =
      seq === 1
        ? {
            case: "runQueued" as const,
            value: create(RunQueuedSchema, { tenantId: "t", prompt: "p" }),
          }
        : {
            case: "outputDelta" as const,
            value: create(OutputDeltaSchema, { text: `chunk ${seq}` }),
          };
    const s = sealEvent(
      { runId: "01JTESTRUN0000000000000000", sessionId: "s", payload },
      seq,
      prev,
      1_700_000_000_000 + seq,
    );
    out.push(s);
    prev = s.hash;
  }
  return out;
}

it("canonical JSON sorts keys at every depth and drops undefined", () => {
  assert.equal(
    canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: "x" }, u: undefined }),
    '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}',
  );
});

it("a sealed chain verifies", () => {
  const events = chain(10);
  const v = verifyChain(events.map((e) => e.json));
  assert.deepEqual(v, { ok: true, count: 10, headHash: events[9]?.hash });
  assert.equal(JSON.parse(events[0]?.json ?? "{}").prevHash, GENESIS_HASH);
});

it("changing one byte of a stored event names that event's seq", () => {
  const lines = chain(10).map((e) => e.json);
  const i = 6; // seq 7
  lines[i] = (lines[i] as string).replace("chunk 7", "chunk 8");
  const v = verifyChain(lines);
  assert.equal(v.ok, false);
  assert.equal(v.ok === false && v.seq, 7);
  assert.match(v.ok === false ? v.reason : "", /hash does not match/);
});

it("a re-hashed forgery breaks the link of the next event", () => {
  const lines = chain(5).map((e) => JSON.parse(e.json) as Record<string, unknown>);
  const forged = lines[2] as Record<string, unknown>;
  forged.outputDelta = { text: "forged" };
  const { hash: _h, ...rest } = forged;
  forged.hash = createHash("sha256").update(canonicalJson(rest)).digest("hex");
  const v = verifyChain(lines);
  assert.equal(v.ok === false && v.seq, 4);
  assert.match(v.ok === false ? v.reason : "", /prevHash/);
});

it("a missing, duplicated or reordered event is named", () => {
  const lines = chain(6).map((e) => e.json);
  const gap = [...lines.slice(0, 3), ...lines.slice(4)];
  assert.equal((verifyChain(gap) as { seq: number }).seq, 4);
  const dup = [...lines.slice(0, 3), lines[2] as string, ...lines.slice(3)];
  assert.equal((verifyChain(dup) as { seq: number }).seq, 4);
  assert.equal((verifyChain(["not json"]) as { seq: number }).seq, 1);
});
