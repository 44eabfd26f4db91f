/**
 * An EventLog that measures its appends (duration histogram, count) and feeds what it
 * appended to the event metrics. Everything else passes through untouched. Must never:
 * change what is stored or how an append fails.
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { AppendRequest, EventLog } from "../eventlog/port.ts";
import { observeEvent } from "./event-metrics.ts";
import { metrics } from "./metrics.ts";

export function instrumentEventLog(log: EventLog): EventLog {
  const labels = { log: log.kind };
  const duration = metrics.appendDuration.labels(labels);
  const appended = metrics.eventsAppended.labels(labels);
  const append = async (req: AppendRequest): Promise<LoggedEvent> => {
    const t0 = performance.now();
    const ev = await log.append(req);
    duration.observe((performance.now() - t0) / 1000);
    appended.inc();
    observeEvent(req.payload);
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
