/**
 * Prometheus metrics of one agentd process (prom-client): the one registry /metrics serves,
 * every metric agentd defines, and the process defaults. prom-client rather than the
 * OpenTelemetry metrics SDK: it writes the Prometheus text format itself (no exporter
 * server of its own beside ours), its gauges are collected at scrape time, and its process
 * and Node.js defaults are the ones Prometheus dashboards expect.
 *
 * One registry per process (counters are incremented by whoever appends an event, so a
 * process running server and worker counts each event once). Label values are bounded:
 * free-form ones (tool names, policy rules, models) go through `bounded()`. Tenant ids are
 * label values only in `tenantRegistry` (served to admin tokens only, /metrics/tenants) and
 * only where the auth file names them (configuration, not input). Must never: use a run id,
 * path, secret or any input as a label value, or register a `tenant`-labelled metric in
 * `registry` (unauthenticated /metrics: anyone reaching the port would list the tenants).
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { agentdVersion } from "../version/version.ts";

export const registry = new Registry();
collectDefaultMetrics({ register: registry });
// prom-client's totals of these are gauges named `_total`, which Prometheus's own lint
// (promtool check metrics) refuses; the per-type gauges of the same name without it stay.
for (const name of [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
])
  registry.removeSingleMetric(name);

const reg = [registry];
/** Per-tenant series: GET /metrics/tenants, admin tokens only (server/tenant-metrics.ts). */
export const tenantRegistry = new Registry();
const tenantReg = [tenantRegistry];
/** Seconds: 5 ms to 10 min, for tool calls and approvals alike. */
const LONG_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Seconds: 10 ms to 1 h, for the queue (a backlog is minutes, an idle cluster milliseconds). */
const WAIT_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
/** Seconds: 1 s to 6 h, for whole runs (queued to ended). */
const RUN_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600];
/** Seconds: 0.5 ms to 5 s, for storage appends. */
const SHORT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

export const metrics = {
  buildInfo: new Gauge({
    name: "agentd_build_info",
    help: "Always 1; the version of this agentd process as a label.",
    labelNames: ["version"],
    registers: reg,
  }),
  runsCreated: new Counter({
    name: "agentd_runs_created_total",
    help: "Runs created (run.queued appended by this process).",
    registers: reg,
  }),
  runsEnded: new Counter({
    name: "agentd_runs_ended_total",
    help: "Runs ended by this process, by outcome (completed, failed, cancelled).",
    labelNames: ["outcome"],
    registers: reg,
  }),
  runDuration: new Histogram({
    name: "agentd_run_duration_seconds",
    help: "Time from run.queued to the run's end, by outcome (completed, failed, cancelled); observed by the process that appended the end.",
    labelNames: ["outcome"],
    buckets: RUN_BUCKETS,
    registers: reg,
  }),
  queueWait: new Histogram({
    name: "agentd_queue_wait_seconds",
    help: "Time from run.queued to the claim of the drive that finds the run not yet started; observed by that worker.",
    buckets: WAIT_BUCKETS,
    registers: reg,
  }),
  workerSlots: new Gauge({
    name: "agentd_worker_slots",
    help: "Runs this worker may drive at once (--concurrency); agentd_runs_active is how many are in use.",
    registers: reg,
  }),
  sandboxesLost: new Counter({
    name: "agentd_sandboxes_lost_total",
    help: "Lost containers replaced with a recovered workspace (sandbox.lost), by outcome: restored (every recorded write re-applied), lost (some effects gone, the run goes on), failed (the policy ended the run).",
    labelNames: ["outcome"],
    registers: reg,
  }),
  runsActive: new Gauge({
    name: "agentd_runs_active",
    help: "Runs this worker drives now (holding for an approval included).",
    registers: reg,
  }),
  runsQueued: new Gauge({
    name: "agentd_runs_queued",
    help: "Runs waiting in the queue, by priority band (1..10); the same cluster-wide value from every server.",
    labelNames: ["band"],
    registers: reg,
  }),
  tenantLimit: new Gauge({
    name: "agentd_tenant_limit",
    help: 'Capacity of each enforced per-tenant limit (limit="concurrentRuns", "tokensPerDay", "costPerDayUsd" in USD, "artifactBytes"), for the tenants the auth file names; the server\'s --tenant-limit where the file sets none.',
    labelNames: ["tenant", "limit"],
    registers: tenantReg,
  }),
  tenantLimitUsed: new Gauge({
    name: "agentd_tenant_limit_used",
    help: "Use of each enforced per-tenant limit, cluster-wide (concurrentRuns: runs starting or running; tokensPerDay, costPerDayUsd: the UTC day so far; artifactBytes: the bytes the tenant stores), for the tenants the auth file names.",
    labelNames: ["tenant", "limit"],
    registers: tenantReg,
  }),
  approvalsPending: new Gauge({
    name: "agentd_approvals_pending",
    help: 'Runs waiting for a person: where="paused" (cluster-wide, from every server) and where="held" (by this worker).',
    labelNames: ["where"],
    registers: reg,
  }),
  approvalWait: new Histogram({
    name: "agentd_approval_wait_seconds",
    help: "Time from approval.requested to its resolution, by decision (approved, denied, expired).",
    labelNames: ["decision"],
    buckets: LONG_BUCKETS,
    registers: reg,
  }),
  toolCalls: new Counter({
    name: "agentd_tool_calls_total",
    help: "Tool calls that got a result, by tool, kernel decision and outcome.",
    labelNames: ["tool", "decision", "outcome"],
    registers: reg,
  }),
  toolDuration: new Histogram({
    name: "agentd_tool_call_duration_seconds",
    help: "Duration of tool calls (the sandbox work, as recorded in tool.result), by tool.",
    labelNames: ["tool"],
    buckets: LONG_BUCKETS,
    registers: reg,
  }),
  policyShadowDifferences: new Counter({
    name: "agentd_policy_shadow_differences_total",
    help: 'Calls whose candidate (shadow) policy would have decided differently from the enforced one (policy.shadow events), by tenant ("" for runs on the server\'s policy without files of their own), enforced and candidate decision.',
    labelNames: ["tenant", "enforced", "candidate"],
    registers: tenantReg,
  }),
  policyDecisions: new Counter({
    name: "agentd_policy_decisions_total",
    help: "Kernel decisions, by decision (auto, preview_auto, preview_approval, deny) and rule.",
    labelNames: ["decision", "rule"],
    registers: reg,
  }),
  modelTokens: new Counter({
    name: "agentd_model_tokens_total",
    help: "Model tokens used, by model and direction (input, output).",
    labelNames: ["model", "direction"],
    registers: reg,
  }),
  modelCost: new Counter({
    name: "agentd_model_cost_usd_total",
    help: "Model cost in US dollars, by model (from the price table).",
    labelNames: ["model"],
    registers: reg,
  }),
  modelSteps: new Counter({
    name: "agentd_model_steps_total",
    help: "Model steps (one LLM call each), by model and outcome (ok, error).",
    labelNames: ["model", "outcome"],
    registers: reg,
  }),
  appendDuration: new Histogram({
    name: "agentd_event_log_append_duration_seconds",
    help: "Duration of event-log appends (durable), by adapter (redis, file).",
    labelNames: ["log"],
    buckets: SHORT_BUCKETS,
    registers: reg,
  }),
  eventsAppended: new Counter({
    name: "agentd_events_appended_total",
    help: "Events appended by this process, by adapter.",
    labelNames: ["log"],
    registers: reg,
  }),
  logRewound: new Counter({
    name: "agentd_log_rewound_total",
    help: "Times the stored event log was found behind what this process had seen (Redis lost acknowledged events), by who found it (writer: a drive's append or gate was refused and the run failed; follower: a live event stream was told to resync).",
    labelNames: ["found_by"],
    registers: reg,
  }),
  eventLogUp: new Gauge({
    name: "agentd_event_log_up",
    help: "1 when the event log answered its last check (at scrape time, bounded), else 0.",
    registers: reg,
  }),
  sandboxCreate: new Histogram({
    name: "agentd_sandbox_create_duration_seconds",
    help: "Time to hand a run its container, by start (warm: from the pool, cold: created).",
    labelNames: ["start"],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: reg,
  }),
  leaseTakeovers: new Counter({
    name: "agentd_lease_takeovers_total",
    help: "Runs this worker took over after their previous owner's lease expired.",
    registers: reg,
  }),
  streamsOpen: new Gauge({
    name: "agentd_event_streams_open",
    help: "Event streams open now, by kind (grpc: StreamEvents, sse, watch: WatchEvents and its SSE).",
    labelNames: ["kind"],
    registers: reg,
  }),
  exportDeliveries: new Counter({
    name: "agentd_export_deliveries_total",
    help: "Event deliveries to export sinks, by sink and result (ok, retry, dead_letter, gap: the sink's cursor fell out of the feed).",
    labelNames: ["sink", "result"],
    registers: reg,
  }),
  exportDeadLetters: new Counter({
    name: "agentd_export_dead_letters_total",
    help: "Events a sink gave up on after its retries (written to its dead-letter list).",
    labelNames: ["sink"],
    registers: reg,
  }),
  retentionRunsDeleted: new Counter({
    name: "agentd_retention_runs_deleted_total",
    help: "Ended runs this process deleted because their tenant's retention passed (--retention, the auth file's tenants.*.retention).",
    registers: reg,
  }),
  retentionSweepErrors: new Counter({
    name: "agentd_retention_sweep_errors_total",
    help: "Retention sweeps or run deletions that failed (Redis unreachable, …); each is retried on a later tick.",
    registers: reg,
  }),
  exportLag: new Gauge({
    name: "agentd_export_lag_seconds",
    help: "Age of the event a sink delivered last, at its delivery; 0 once the sink has read the whole feed. By sink.",
    labelNames: ["sink"],
    registers: reg,
  }),
  apiRequestsLimited: new Counter({
    name: "agentd_api_requests_limited_total",
    help: "API calls refused with RESOURCE_EXHAUSTED by this process's per-token rate limit (--rate-limit, a token's rate:), by tenant (the auth file's tenants only).",
    labelNames: ["tenant"],
    registers: tenantReg,
  }),
};

metrics.buildInfo.set({ version: agentdVersion() }, 1);

const seen = new Map<string, Set<string>>();
/** Most distinct values one free-form label may take; later ones are counted as "other". */
export const LABEL_VALUES_MAX = 100;

/** `value` while the label `name` has seen fewer than LABEL_VALUES_MAX values, else "other". */
export function bounded(name: string, value: string): string {
  let values = seen.get(name);
  if (values === undefined) {
    values = new Set();
    seen.set(name, values);
  }
  if (values.has(value)) return value;
  if (values.size >= LABEL_VALUES_MAX || value.length > 64 || value === "") return "other";
  values.add(value);
  return value;
}
