/**
 * What the taker reads of a lost drive from the log (lost-drive.ts): its worker, epoch and
 * start from its own run.started/run.resumed (the first of its epoch), else the log's last
 * event; its span id only when well-formed; the calls it started and never answered, by
 * name and id only.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { lostDriveOf } from "./lost-drive.ts";

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);
let seq = 0;
const ev = (ms: number, type: string, payload: Event["payload"]): Event =>
  create(EventSchema, { seq: BigInt(++seq), type, ts: timestampFromMs(ms), payload });

const queued = () => ev(T0, "run.queued", { case: "runQueued", value: { prompt: "p" } as never });
const started = (ms: number, epoch: number, spanId = "", workerId = "h:1") =>
  ev(ms, "run.started", {
    case: "runStarted",
    value: { workerId, epoch: BigInt(epoch), spanId } as never,
  });
const resumed = (ms: number, epoch: number, spanId = "", workerId = "h:2") =>
  ev(ms, "run.resumed", {
    case: "runResumed",
    value: { workerId, epoch: BigInt(epoch), spanId } as never,
  });
const toolCall = (ms: number, callId: string, tool: string, input: unknown) =>
  ev(ms, "tool.call", {
    case: "toolCall",
    value: { callId, tool, inputJson: JSON.stringify(input) } as never,
  });
const toolStarted = (ms: number, callId: string) =>
  ev(ms, "tool.started", { case: "toolStarted", value: { callId, workerId: "h:1" } as never });
const toolResult = (ms: number, callId: string) =>
  ev(ms, "tool.result", { case: "toolResult", value: { callId, ok: true } as never });

it("the lost drive's start, worker, span id and the call it left started", () => {
  const span = "a1b2c3d4e5f60718";
  const events = [
    queued(),
    started(T0 + 1000, 1, span),
    toolCall(T0 + 2000, "call_1", "process.run", { command: "secret-input" }),
    toolStarted(T0 + 2100, "call_1"),
    toolResult(T0 + 2500, "call_1"),
    toolCall(T0 + 3000, "call_2", "process.run", { command: "secret-input" }),
    toolStarted(T0 + 3100, "call_2"),
  ];
  const lost = lostDriveOf(events, 2, T0 + 9000);
  assert.deepEqual(lost, {
    epoch: 1,
    workerId: "h:1",
    startMs: T0 + 1000,
    startFrom: "run.started",
    spanId: span,
    interrupted: [{ tool: "process.run", callId: "call_2", startedMs: T0 + 3100 }],
  });
  assert.ok(!JSON.stringify(lost).includes("secret-input"), "no call input");
});

it("a call that never started is not interrupted", () => {
  const events = [
    queued(),
    started(T0 + 1000, 1),
    toolCall(T0 + 2000, "call_1", "process.run", {}),
  ];
  assert.deepEqual(lostDriveOf(events, 2, T0 + 9000).interrupted, []);
});

it("the first start of the lost epoch (a drive that held and resumed records run.resumed again)", () => {
  const events = [
    queued(),
    started(T0 + 1000, 1, "1111111111111111"),
    resumed(T0 + 5000, 2, "2222222222222222", "h:2"),
    resumed(T0 + 8000, 2, "2222222222222222", "h:2"),
  ];
  const lost = lostDriveOf(events, 3, T0 + 9000);
  assert.equal(lost.startMs, T0 + 5000);
  assert.equal(lost.startFrom, "run.resumed");
  assert.equal(lost.workerId, "h:2");
  assert.equal(lost.spanId, "2222222222222222");
});

it("a lost drive that recorded no start: the log's last event, no worker, no span", () => {
  const events = [queued(), started(T0 + 1000, 1, "1111111111111111")];
  const lost = lostDriveOf(events, 5, T0 + 9000);
  assert.deepEqual(lost, {
    epoch: 4,
    workerId: "",
    startMs: T0 + 1000,
    startFrom: "log.last_event",
    interrupted: [],
  });
  assert.equal(lostDriveOf([], 1, T0 + 9000).startFrom, "none");
  assert.equal(lostDriveOf([], 1, T0 + 9000).startMs, T0 + 9000);
});

it("a recorded span id that is not 16 lowercase hex digits (or is all zeros) is not linked", () => {
  for (const bad of [
    "",
    "A1B2C3D4E5F60718",
    "a1b2c3d4e5f6071",
    "a1b2c3d4e5f607189",
    "0000000000000000",
    "a1b2c3d4e5f6071g",
    "a1b2c3d4e5f60718\n",
    "../../../../etc/",
  ]) {
    const lost = lostDriveOf([queued(), started(T0 + 1, 1, bad)], 2, T0 + 9);
    assert.equal(lost.spanId, undefined, JSON.stringify(bad));
  }
});
