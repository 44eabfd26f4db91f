/**
 * canonicalJsonWith (the one-pass sealing used by sealEvent) must give byte for byte what
 * the two-pass definition gives: hash the canonical form without `key`, add it, encode
 * again. A difference would make sealed events fail verification.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ApprovalRequestedSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { canonicalJson, canonicalJsonWith } from "./canonical-json.ts";
import { sealEvent } from "./event-codec.ts";
import { computeEventHash, sha256Hex } from "./hash-chain.ts";

function twoPass(obj: Record<string, unknown>, key: string): { value: string; json: string } {
  const { [key]: _dropped, ...rest } = obj;
  const value = sha256Hex(canonicalJson(rest));
  return { value, json: canonicalJson({ ...rest, [key]: value }) };
}

const KEYS = ["", "a", "hash", "hasH", "hash2", "has", "z", "é", "😀", "\u2028", "10", "9", "_x"];

it("canonicalJsonWith equals the two-pass definition, wherever the key sorts", () => {
  for (let i = 0; i < 500; i++) {
    const obj: Record<string, unknown> = {};
    for (let j = 0; j <= i % 7; j++) {
      const k = `${KEYS[(i * 5 + j * 3) % KEYS.length]}${j % 2 === 0 ? "" : String(j)}`;
      obj[k] =
        j % 4 === 0
          ? { b: [1, undefined, 'x\u2028"\\', { z: null, a: [] }], a: KEYS[j % KEYS.length] }
          : j % 4 === 1
            ? [KEYS[i % KEYS.length], 3.5, true, -0]
            : j % 4 === 2
              ? undefined
              : `v${i}`;
    }
    if (i % 3 === 0) obj.hash = "stale"; // an existing member named like the key is replaced
    assert.deepEqual(canonicalJsonWith(obj, "hash", sha256Hex), twoPass(obj, "hash"));
  }
});

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
