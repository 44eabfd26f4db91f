/**
 * Starts a runner per configured sink (server and dev: `--export-config`) and stops them
 * all. Webhooks deliver with deliverWebhook; OTLP logs through one exporter per sink.
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Sink } from "./config.ts";
import { createOtlpLogs } from "./otlp-logs.ts";
import { type RunnerDeps, type SinkRunner, startSinkRunner } from "./runner.ts";
import { deliverWebhook } from "./webhook.ts";

export interface Exporter {
  stop(): Promise<void>;
}

export function startExporter(sinks: readonly Sink[], deps: Omit<RunnerDeps, "holder">): Exporter {
  const holder = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const closers: (() => Promise<void>)[] = [];
  const runners: SinkRunner[] = sinks.map((sink) => {
    if (sink.type === "webhook")
      return startSinkRunner(
        sink,
        (item, attempt, signal) => deliverWebhook(sink, item, attempt, signal),
        {
          ...deps,
          holder,
        },
      );
    const otlp = createOtlpLogs(sink, deps.log);
    closers.push(() => otlp.close());
    return startSinkRunner(sink, (item, _attempt, signal) => otlp.deliver(item, signal), {
      ...deps,
      holder,
    });
  });
  return {
    async stop() {
      await Promise.all(runners.map((r) => r.stop()));
      await Promise.allSettled(closers.map((c) => c()));
    },
  };
}
