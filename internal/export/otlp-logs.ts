/**
 * OTLP logs delivery: each event one log record (OTLP/HTTP, the collector's /v1/logs),
 * correlated with its run's trace: the record's trace id and span id are those stored with
 * the run at CreateRun, so a backend shows the events under the run's trace. Body: the
 * event's canonical JSON; attributes: ids, type and seq only. Uses OpenTelemetry's own OTLP
 * exporter (its encoding and transport), called once per event so that the runner knows
 * each event's outcome.
 */

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { type Attributes, SeverityNumber, type SpanContext, trace } from "@opentelemetry/api";
import { ExportResultCode, millisToHrTime } from "@opentelemetry/core";
import { OTLPLogExporter } from "@opentelemetry/exporter-logs-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import type { ReadableLogRecord } from "@opentelemetry/sdk-logs";
import type { FeedItem } from "../api/tenant-feed.ts";
import type { EventLog } from "../eventlog/port.ts";
import { createRunOriginCache } from "../eventlog/run-origin.ts";
import { contextOf } from "../telemetry/trace-context.ts";
import { agentdVersion } from "../version/version.ts";
import type { OtlpLogsConfig } from "./config.ts";

const RESOURCE = resourceFromAttributes({
  "service.name": "agentd",
  "service.version": agentdVersion(),
});
const SCOPE = { name: "agentd.export", version: agentdVersion() };
// log.rewound: the stored log lost acknowledged events (an operator must look).
const ERROR_TYPES = new Set(["run.failed", "log.rewound"]);
/** A container lost and replaced: effects of the run may be gone (worker/workspace-recovery.ts). */
const WARN_TYPES = new Set(["sandbox.lost"]);

export interface OtlpLogsDeliverer {
  /** One record; a stop (`signal`) ends the wait at once (the request is left to its timeout). */
  deliver(item: FeedItem, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export function createOtlpLogs(sink: OtlpLogsConfig, log: EventLog): OtlpLogsDeliverer {
  const exporter = new OTLPLogExporter({
    url: sink.endpoint,
    headers: sink.headers,
    timeoutMillis: sink.timeoutMs,
  });
  const origin = createRunOriginCache(log);
  const traces = async (runId: string): Promise<SpanContext | undefined> => {
    const q = await origin(runId);
    return q === undefined
      ? undefined
      : trace.getSpanContext(contextOf(q.traceParent, q.traceState));
  };
  return {
    async deliver(item, signal) {
      const record = recordOf(item, await traces(item.event.runId));
      await new Promise<void>((resolve, reject) => {
        const stopped = (): void => reject(new Error("stopped"));
        if (signal?.aborted) return stopped();
        signal?.addEventListener("abort", stopped, { once: true });
        exporter.export([record], (r) => {
          signal?.removeEventListener("abort", stopped);
          if (r.code === ExportResultCode.SUCCESS) resolve();
          else reject(r.error ?? new Error("the collector refused the logs"));
        });
      });
    },
    close: () => exporter.shutdown(),
  };
}

function recordOf(item: FeedItem, span: SpanContext | undefined): ReadableLogRecord {
  const ev = item.event.event;
  // Epoch milliseconds to [s, ns]: millisToHrTime. Never core's hrTime(ms): it takes a
  // performance.now() reading and adds the process's time origin to it, which put every
  // record ~56 years ahead (timeUnixNano in 2083).
  const at = millisToHrTime(ev.ts === undefined ? Date.now() : timestampMs(ev.ts));
  const attributes: Attributes = {
    "agentd.run.id": ev.runId,
    "agentd.event.id": ev.eventId,
    "agentd.event.type": ev.type,
    "agentd.event.seq": Number(ev.seq),
    "agentd.cursor": item.cursor,
    "gen_ai.conversation.id": ev.sessionId,
  };
  const error = ERROR_TYPES.has(ev.type);
  const warn = WARN_TYPES.has(ev.type);
  return {
    hrTime: at,
    hrTimeObserved: millisToHrTime(Date.now()),
    ...(span === undefined ? {} : { spanContext: span }),
    severityNumber: error ? SeverityNumber.ERROR : warn ? SeverityNumber.WARN : SeverityNumber.INFO,
    severityText: error ? "ERROR" : warn ? "WARN" : "INFO",
    eventName: ev.type,
    body: item.event.json,
    resource: RESOURCE,
    instrumentationScope: SCOPE,
    attributes,
    droppedAttributesCount: 0,
  };
}
