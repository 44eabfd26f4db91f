/**
 * known-series.ts: the known label sets exist at 0 after priming, priming again keeps what
 * was counted, and the sets are the ones docs/observability.md documents. run-clock.ts: a
 * queue wait is observed once, for a run not started yet, in seconds.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  type Event,
  EventSchema,
  RunQueuedSchema,
  RunStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import {
  KNOWN,
  primeDriverSeries,
  primeKnownSeries,
  primeSinkSeries,
  toolLabels,
} from "./known-series.ts";
import { metrics, registry } from "./metrics.ts";
import { observeQueueWait } from "./run-clock.ts";

const text = () => registry.metrics();

it("priming creates every known series at 0, and priming again keeps what was counted", async () => {
  primeKnownSeries();
  primeDriverSeries("gpt-test", 3);
  primeSinkSeries("hook");
  const t = await text();
  for (const outcome of KNOWN.runOutcomes) {
    assert.match(t, new RegExp(`^agentd_runs_ended_total\\{outcome="${outcome}"\\} 0$`, "m"));
    assert.match(
      t,
      new RegExp(`^agentd_run_duration_seconds_count\\{outcome="${outcome}"\\} 0$`, "m"),
    );
  }
  for (const tool of toolLabels())
    for (const decision of KNOWN.toolDecisions)
      for (const outcome of KNOWN.toolOutcomes)
        assert.ok(
          t.includes(
            `agentd_tool_calls_total{tool="${tool}",decision="${decision}",outcome="${outcome}"} 0\n`,
          ),
          `${tool} ${decision} ${outcome} at 0`,
        );
  assert.match(t, /^agentd_approvals_pending\{where="held"\} 0$/m);
  assert.match(t, /^agentd_retention_runs_deleted_total 0$/m);
  assert.match(t, /^agentd_retention_sweep_errors_total 0$/m);
  assert.match(t, /^agentd_worker_slots 3$/m);
  assert.match(t, /^agentd_model_steps_total\{model="gpt-test",outcome="error"\} 0$/m);
  assert.match(t, /^agentd_export_deliveries_total\{sink="hook",result="dead_letter"\} 0$/m);
  assert.doesNotMatch(
    t,
    /agentd_approvals_pending\{where="paused"\}/,
    "paused is the servers' to say",
  );

  metrics.runsEnded.inc({ outcome: "failed" });
  primeKnownSeries();
  assert.match(await text(), /^agentd_runs_ended_total\{outcome="failed"\} 1$/m);
});

it("the primed label sets are the documented ones", () => {
  const doc = readFileSync(new URL("../../docs/observability.md", import.meta.url), "utf8");
  const row = (metric: string) =>
    doc.split("\n").find((l) => l.startsWith(`| \`${metric}\``)) ?? "";
  const list = (s: string | undefined) => (s ?? "").split(",").map((x) => x.trim().split(" ")[0]);
  const tools = row("agentd_tool_calls_total");
  assert.deepEqual(list(/`decision`: ([^.]*)\./.exec(tools)?.[1]), [...KNOWN.toolDecisions]);
  assert.deepEqual(list(/`outcome`: ([^|]*)/.exec(tools)?.[1]), [...KNOWN.toolOutcomes]);
  for (const [metric, values] of [
    ["agentd_runs_ended_total", KNOWN.runOutcomes],
    ["agentd_run_duration_seconds", KNOWN.runOutcomes],
    ["agentd_sandboxes_lost_total", KNOWN.lostOutcomes],
    ["agentd_approval_wait_seconds", KNOWN.approvalDecisions],
    ["agentd_log_rewound_total", KNOWN.foundBy],
    ["agentd_sandbox_create_duration_seconds", KNOWN.sandboxStarts],
    ["agentd_event_streams_open", KNOWN.streamKinds],
    ["agentd_export_deliveries_total", KNOWN.exportResults],
  ] as const) {
    const m = /` = ([a-z_, ]+?)\s*\|/.exec(row(metric));
    assert.deepEqual(list(m?.[1]), [...values], metric);
  }
});

function event(payload: Event["payload"], tsMs: number): Event {
  return create(EventSchema, { payload, ts: timestampFromMs(tsMs) });
}

it("a queue wait is observed in seconds, only for a run that never started", async () => {
  const count = async () =>
    (await metrics.queueWait.get()).values.find((v) => v.metricName?.endsWith("_count"))?.value ??
    0;
  const sum = async () =>
    (await metrics.queueWait.get()).values.find((v) => v.metricName?.endsWith("_sum"))?.value ?? 0;
  const queued = event({ case: "runQueued", value: create(RunQueuedSchema, {}) }, 1_000_000);
  const [c0, s0] = [await count(), await sum()];
  observeQueueWait([queued], 1_002_500);
  assert.equal((await count()) - c0, 1);
  assert.equal((await sum()) - s0, 2.5);
  const started = event({ case: "runStarted", value: create(RunStartedSchema, {}) }, 1_003_000);
  observeQueueWait([queued, started], 1_009_000);
  observeQueueWait([started], 1_009_000);
  assert.equal((await count()) - c0, 1, "a started run, or one without run.queued, is not counted");
  // A clock behind run.queued's never makes a negative wait.
  observeQueueWait([queued], 999_000);
  assert.equal((await sum()) - s0, 2.5);
});
