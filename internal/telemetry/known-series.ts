/**
 * The series whose label values are known before anything happens, created at 0 when a
 * process starts. Prometheus's increase() and rate() count from a series' first sample: a
 * series born at 1 (the first failed run after a pod start) reads as "always 1", so a
 * failure ratio over any window would miss that failure. Every label value here comes from a
 * closed set (outcomes, decisions, agentd's tool names) or the process's own configuration
 * (its model, its event log, its export sinks, the tenants its auth file names). Must never:
 * create a series for a tenant a caller named, a run, policy rule, model output or any
 * other input.
 */
import { TOOLS } from "../tools/registry.ts";
import { bounded, metrics } from "./metrics.ts";

/** The closed label sets, as documented in docs/observability.md. */
export const KNOWN = {
  runOutcomes: ["completed", "failed", "cancelled"],
  lostOutcomes: ["restored", "lost", "failed"],
  approvalDecisions: ["approved", "denied", "expired"],
  /** The kernel's paths, and "none": a call settled before it reached a decision. */
  toolDecisions: ["auto", "preview_auto", "preview_approval", "deny", "none"],
  toolOutcomes: [
    "ok",
    "error",
    "denied",
    "approval_denied",
    "cancelled",
    "interrupted",
    "timeout",
    "too_large",
  ],
  foundBy: ["writer", "follower"],
  sandboxStarts: ["warm", "cold"],
  streamKinds: ["grpc", "sse", "watch"],
  stepOutcomes: ["ok", "error"],
  directions: ["input", "output"],
  exportResults: ["ok", "retry", "dead_letter", "gap"],
} as const;

/** agentd's tool names and "unknown" (whatever else a model called): the `tool` label's values. */
export function toolLabels(): string[] {
  return [...TOOLS.map((t) => t.name), "unknown"];
}

/**
 * Creates the known series every process may count at 0 (idempotent: a series that exists
 * keeps its value). Servers and workers both end runs, resolve approvals and see rewound
 * logs; the tool series are the workers', primed everywhere so that one query fits all.
 */
export function primeKnownSeries(): void {
  for (const outcome of KNOWN.runOutcomes) {
    metrics.runsEnded.inc({ outcome }, 0);
    metrics.runDuration.zero({ outcome });
  }
  for (const outcome of KNOWN.lostOutcomes) metrics.sandboxesLost.inc({ outcome }, 0);
  for (const decision of KNOWN.approvalDecisions) metrics.approvalWait.zero({ decision });
  for (const found_by of KNOWN.foundBy) metrics.logRewound.inc({ found_by }, 0);
  for (const kind of KNOWN.streamKinds) metrics.streamsOpen.inc({ kind }, 0);
  metrics.retentionRunsDeleted.inc(0);
  metrics.retentionSweepErrors.inc(0);
  for (const tool of toolLabels()) {
    metrics.toolDuration.zero({ tool });
    for (const decision of KNOWN.toolDecisions)
      for (const outcome of KNOWN.toolOutcomes)
        metrics.toolCalls.inc({ tool, decision, outcome }, 0);
  }
}

/**
 * The series of a process that drives runs (worker, dev): held approvals, sandbox starts,
 * its model's steps, tokens and cost, and its slots.
 */
export function primeDriverSeries(name: string, slots: number): void {
  metrics.workerSlots.set(slots);
  metrics.approvalsPending.inc({ where: "held" }, 0);
  for (const start of KNOWN.sandboxStarts) metrics.sandboxCreate.zero({ start });
  const model = bounded("model", name);
  metrics.modelCost.inc({ model }, 0);
  for (const outcome of KNOWN.stepOutcomes) metrics.modelSteps.inc({ model, outcome }, 0);
  for (const direction of KNOWN.directions) metrics.modelTokens.inc({ model, direction }, 0);
}

/** An event log's append series (by adapter). */
export function primeLogSeries(log: string): void {
  metrics.eventsAppended.inc({ log }, 0);
  metrics.appendDuration.zero({ log });
}

/** An export sink's series: its deliveries by result and its dead letters. */
export function primeSinkSeries(sink: string): void {
  for (const result of KNOWN.exportResults) metrics.exportDeliveries.inc({ sink, result }, 0);
  metrics.exportDeadLetters.inc({ sink }, 0);
}

/** The API's per-tenant series, for the tenants the auth file names (again after a reload). */
export function primeTenantSeries(tenants: Iterable<string>): void {
  for (const tenant of tenants) metrics.apiRequestsLimited.inc({ tenant }, 0);
}
