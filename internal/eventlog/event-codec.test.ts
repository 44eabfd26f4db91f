import assert from "node:assert/strict";
import { it } from "node:test";
import { gunzipSync } from "node:zlib";
import {
  create,
  fromBinary,
  fromJsonString,
  toBinary,
  toJson,
  toJsonString,
} from "@bufbuild/protobuf";
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
import { StreamEventsResponseSchema } from "../gen/agentd/v1/run_service_pb.js";
import { canonicalJson } from "./canonical-json.ts";
import { type EventPayload, LoggedEvent, sealEvent } from "./event-codec.ts";
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

it("grpcFrame is the gRPC message of StreamEventsResponse{event}; grpcFrameGzip the same, compressed", () => {
  const sealed = sealEvent(
    {
      runId: "01J0000000000000000000RUN1",
      sessionId: "s",
      payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text: "é".repeat(900) }) },
    },
    7,
    "",
    Date.UTC(2026, 0, 2, 3, 4, 5, 120),
  );
  const ev = new LoggedEvent("01J0000000000000000000RUN1", 7, sealed.json);
  const frame = Buffer.from(ev.grpcFrame);
  assert.equal(frame[0], 0, "not compressed");
  assert.equal(frame.readUInt32BE(1), frame.length - 5);
  const expected = toBinary(
    StreamEventsResponseSchema,
    create(StreamEventsResponseSchema, { event: ev.event }),
  );
  assert.deepEqual(new Uint8Array(frame.subarray(5)), expected);
  assert.equal(ev.grpcFrame, ev.grpcFrame, "memoised");
  // lengthPrefixedBinary: the field's value, i.e. the message without its tag byte.
  assert.deepEqual(new Uint8Array(ev.lengthPrefixedBinary), expected.subarray(1));
  const z = Buffer.from(ev.grpcFrameGzip);
  assert.equal(z[0], 1, "compressed flag");
  assert.equal(z.readUInt32BE(1), z.length - 5);
  assert.ok(z.length < frame.length);
  const decoded = fromBinary(StreamEventsResponseSchema, gunzipSync(z.subarray(5)));
  assert.equal(decoded.event?.hash, sealed.hash);
  assert.equal(
    toJsonString(EventSchema, decoded.event as never),
    toJsonString(EventSchema, ev.event),
  );
});

it("sealing is canonical for every payload case, with or without run and session ids", () => {
  const oneof = EventSchema.oneofs.find((o) => o.localName === "payload");
  assert.ok(oneof);
  for (const f of oneof.fields) {
    assert.ok(f.message);
    const payload = { case: f.localName, value: create(f.message) } as EventPayload;
    for (const [runId, sessionId] of [
      ["01JTESTRUN0000000000000000", 's "1" ✓'],
      ["", ""],
    ]) {
      const s = sealEvent(
        { runId: runId as string, sessionId: sessionId as string, payload },
        3,
        "",
        1_763_800_000_120,
      );
      const decoded = fromJsonString(EventSchema, s.json);
      assert.equal(canonicalJson(toJson(EventSchema, decoded)), s.json, f.localName);
      assert.equal(computeEventHash(JSON.parse(s.json)), s.hash);
    }
  }
});
