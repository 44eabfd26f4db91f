/**
 * An EventLog that measures its appends (duration histogram, count) and feeds what it
 * appended to the event metrics (a run's end also its duration, run-clock.ts). Everything else passes through untouched. Must never:
 * change what is stored or how an append fails.
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { AppendRequest, EventLog } from "../eventlog/port.ts";
import { observeEvent } from "./event-metrics.ts";
import { primeLogSeries } from "./known-series.ts";
import { metrics } from "./metrics.ts";
import { observeRunEnd } from "./run-clock.ts";

/** The payloads that end a run: their appends observe the run's duration. */
const TERMINAL = new Set<string>(["runCompleted", "runFailed", "runCancelled"]);

export function instrumentEventLog(log: EventLog): EventLog {
  const labels = { log: log.kind };
  const duration = metrics.appendDuration.labels(labels);
  const appended = metrics.eventsAppended.labels(labels);
  primeLogSeries(log.kind);
  const append = async (req: AppendRequest): Promise<LoggedEvent> => {
    const t0 = performance.now();
    const ev = await log.append(req);
    duration.observe((performance.now() - t0) / 1000);
    appended.inc();
    observeEvent(req.payload);
    if (TERMINAL.has(req.payload.case)) void observeRunEnd(log, ev);
    return ev;
  };
  // A proxy, not a copy: adapters keep private fields (methods run on the adapter itself)
  // and the composition root still tells them apart with instanceof.
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(log, {
    get(target, prop) {
      if (prop === "append") return append;
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      let fn = bound.get(prop);
      if (fn === undefined) {
        fn = value.bind(target);
        bound.set(prop, fn);
      }
      return fn;
    },
  });
}
