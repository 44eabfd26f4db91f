/**
 * Sealing (sealEvent builds the canonical form directly) must give byte for byte what the
 * two-pass definition gives: hash the canonical form without `hash`, add it, encode again.
 * A difference would make sealed events fail verification.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ApprovalRequestedSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { canonicalJson } from "./canonical-json.ts";
import { sealEvent } from "./event-codec.ts";
import { computeEventHash } from "./hash-chain.ts";

it("sealed events carry the hash of their canonical form and are canonical themselves", () => {
  const payloads = [
    {
      case: "runQueued" as const,
      value: create(RunQueuedSchema, {
        tenantId: "t",
        prompt: 'p\u2028"é😀',
        skills: ["b", "a"],
        labels: { z: "1", a: "2", "10": "x", "9": "y" },
        priority: 5,
      }),
    },
    {
      case: "approvalRequested" as const,
      value: create(ApprovalRequestedSchema, {}),
    },
  ];
  for (const payload of payloads) {
    const s = sealEvent({ runId: "r", sessionId: "s", payload }, 1, "", 1_700_000_000_000);
    const parsed = JSON.parse(s.json) as Record<string, unknown>;
    assert.equal(canonicalJson(parsed), s.json);
    assert.equal(parsed.hash, s.hash);
    assert.equal(computeEventHash(parsed), s.hash);
  }
});
