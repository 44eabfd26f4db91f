/**
 * The stand-in span of a lost drive (lost-drive-span.ts) through the real OpenTelemetry
 * SDK and its in-memory exporter: in the run's trace under the stored parent, started and
 * ended when told, ERROR "worker lost", `agentd.drive.lost`, an event per interrupted call
 * (name and id only), a link to the lost drive's own span; and the taker's drive span
 * (run-span.ts) links to it and carries the same events.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { emitLostDriveSpan, type LostDriveInfo } from "./lost-drive-span.ts";
import { startRunSpan } from "./run-span.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
);

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);
const info: LostDriveInfo = {
  runId: "run_1",
  sessionId: "ses_1",
  traceParent: `00-${TRACE}-${PARENT}-01`,
  traceState: "",
  epoch: 3,
  workerId: "host:42",
  startMs: T0,
  startFrom: "run.started",
  spanId: "a1b2c3d4e5f60718",
  interrupted: [{ tool: "process.run", callId: "call_7", startedMs: T0 + 500 }],
};
const ms = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;

it("the stand-in and the taker's link to it", () => {
  exporter.reset();
  const sc = emitLostDriveSpan(info, T0 + 4000);
  assert.ok(sc);
  const taker = startRunSpan({
    runId: "run_1",
    sessionId: "ses_1",
    traceParent: info.traceParent,
    traceState: "",
    model: "m",
    workerId: "host:43",
    epoch: 4,
    links: [{ context: sc }],
    interrupted: info.interrupted,
  });
  assert.match(taker.spanId ?? "", /^[0-9a-f]{16}$/);
  taker.end("completed");
  const [standIn, drive] = exporter.getFinishedSpans();
  assert.ok(standIn && drive);
  assert.equal(standIn.name, "invoke_agent agentd");
  assert.equal(standIn.spanContext().traceId, TRACE);
  assert.equal(standIn.parentSpanContext?.spanId, PARENT);
  assert.equal(ms(standIn.startTime), T0);
  assert.equal(ms(standIn.endTime), T0 + 4000);
  assert.deepEqual(standIn.status, { code: SpanStatusCode.ERROR, message: "worker lost" });
  assert.equal(standIn.attributes["agentd.drive.lost"], true);
  assert.equal(standIn.attributes["agentd.worker.id"], "host:42");
  assert.equal(standIn.attributes["agentd.lease.epoch"], 3);
  assert.deepEqual(
    standIn.events.map((e) => [e.name, e.attributes, ms(e.time)]),
    [
      [
        "agentd.call.interrupted",
        { "gen_ai.tool.name": "process.run", "gen_ai.tool.call.id": "call_7" },
        T0 + 500,
      ],
    ],
  );
  assert.deepEqual(
    standIn.links.map((l) => [l.context.traceId, l.context.spanId]),
    [[TRACE, "a1b2c3d4e5f60718"]],
  );
  assert.deepEqual(
    drive.links.map((l) => l.context.spanId),
    [standIn.spanContext().spanId],
  );
  assert.deepEqual(
    drive.events.map((e) => e.attributes?.["gen_ai.tool.call.id"]),
    ["call_7"],
  );
  assert.equal(drive.attributes["agentd.drive.lost"], undefined);
});

it("no recorded span id, no worker: no link, no worker attribute; a start after the end is clamped", () => {
  exporter.reset();
  const { spanId: _, ...rest } = info;
  emitLostDriveSpan({ ...rest, workerId: "", interrupted: [], startMs: T0 + 9000 }, T0 + 4000);
  const [s] = exporter.getFinishedSpans();
  assert.ok(s);
  assert.deepEqual(s.links, []);
  assert.equal(s.attributes["agentd.worker.id"], undefined);
  assert.ok(ms(s.startTime) <= ms(s.endTime));
  assert.deepEqual(s.events, []);
});

it("a run with no stored trace context: a stand-in in a fresh trace, no link to a span id", () => {
  exporter.reset();
  emitLostDriveSpan({ ...info, traceParent: "" }, T0 + 4000);
  const [s] = exporter.getFinishedSpans();
  assert.ok(s);
  assert.equal(s.parentSpanContext, undefined);
  assert.deepEqual(s.links, []);
});
