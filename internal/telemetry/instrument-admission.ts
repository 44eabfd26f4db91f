/**
 * A RunAdmission measured like the event log's appends (instrument-log.ts): its first event
 * counts in agentd_events_appended_total and the append duration, and feeds the event
 * metrics (agentd_runs_created_total counts `run.queued`), since it is written by the
 * admission's own script and never passes through the instrumented log. Must never: change
 * what is stored or how an admission fails.
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { AdmitRequest, RunAdmission } from "../scheduler/admission.ts";
import { observeEvent } from "./event-metrics.ts";
import { primeLogSeries } from "./known-series.ts";
import { metrics } from "./metrics.ts";

export function instrumentAdmission(admission: RunAdmission, logKind: string): RunAdmission {
  const labels = { log: logKind };
  const duration = metrics.appendDuration.labels(labels);
  const appended = metrics.eventsAppended.labels(labels);
  primeLogSeries(logKind);
  return {
    async admit(req: AdmitRequest): Promise<LoggedEvent> {
      const t0 = performance.now();
      const ev = await admission.admit(req);
      duration.observe((performance.now() - t0) / 1000);
      appended.inc();
      observeEvent(req.first.payload);
      return ev;
    },
  };
}
