import assert from "node:assert/strict";
import { it } from "node:test";
import { create, fromJsonString, toJson } from "@bufbuild/protobuf";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  ApprovalResolvedSchema,
  Decision,
  EventSchema,
  OutputDeltaSchema,
  PolicyDecisionSchema,
  PreviewSchema,
  RunCancelledSchema,
  RunCompletedSchema,
  RunQueuedSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { canonicalJson } from "./canonical-json.ts";
import { type EventPayload, sealEvent } from "./event-codec.ts";
import { computeEventHash } from "./hash-chain.ts";

const payloads: EventPayload[] = [
  {
    case: "runQueued",
    value: create(RunQueuedSchema, {
      tenantId: "acme",
      prompt: 'fix "it" ✓\n',
      priority: 5,
      skills: ["a"],
      labels: { z: "1", a: "2" },
      workspaceSizeBytes: 12n,
    }),
  },
  {
    case: "outputDelta",
    value: create(OutputDeltaSchema, { text: "héllo \u0000 \u2028 </script>" }),
  },
  { case: "runCancelled", value: create(RunCancelledSchema) },
  {
    case: "toolResult",
    value: create(ToolResultSchema, {
      callId: "c",
      ok: false,
      exitCode: -1,
      durationMs: 9007199254740993n,
      error: { code: "E", message: "m" },
    }),
  },
  {
    case: "policyDecision",
    value: create(PolicyDecisionSchema, {
      decision: Decision.DENY,
      risk: { category: "exec", touchesSecrets: true },
    }),
  },
  {
    case: "approvalRequested",
    value: create(ApprovalRequestedSchema, {
      approvalId: "a",
      preview: create(PreviewSchema, { argv: ["rm", "-rf"], hunks: 2 }),
      expiresAt: { seconds: 1n, nanos: 5_000_000 },
    }),
  },
  {
    case: "approvalResolved",
    value: create(ApprovalResolvedSchema, { decision: ApprovalDecision.APPROVE }),
  },
  {
    case: "runCompleted",
    value: create(RunCompletedSchema, {
      summary: "done",
      usage: { inputTokens: 10n, outputTokens: 0n },
      costMicros: 0n,
    }),
  },
];

it("sealed JSON is byte for byte the canonical protobuf-JSON of the event", () => {
  for (const [i, payload] of payloads.entries()) {
    for (const ms of [1_763_800_000_000, 1_763_800_000_120, 1_763_800_000_007]) {
      for (const sessionId of ["s-1", ""]) {
        const s = sealEvent(
          { runId: "01JTESTRUN0000000000000000", sessionId, payload },
          i + 1,
          "ab".repeat(32),
          ms,
        );
        const decoded = fromJsonString(EventSchema, s.json);
        assert.equal(
          canonicalJson(toJson(EventSchema, decoded)),
          s.json,
          `${payload.case} @${ms} session=${JSON.stringify(sessionId)}`,
        );
        assert.equal(computeEventHash(JSON.parse(s.json)), s.hash);
        assert.equal(decoded.type, s.type);
        assert.equal(
          Number(decoded.ts?.seconds) * 1000 + Math.round((decoded.ts?.nanos ?? 0) / 1e6),
          ms,
        );
      }
    }
  }
});
