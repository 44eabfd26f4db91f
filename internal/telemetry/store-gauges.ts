/**
 * Scrape-time gauges of a process (server, dev, worker): the queue's depth by priority band and
 * its paused runs, and whether the event log answers. Values the store cannot give in time
 * stay as they were (stale, never blocking); agentd_event_log_up says which.
 */
import type { EventLog } from "../eventlog/port.ts";
import type { RunQueue } from "../scheduler/port.ts";
import { metrics } from "./metrics.ts";
import { onScrape } from "./scrape.ts";

export function registerStoreGauges(log: EventLog, queue: RunQueue | undefined): () => void {
  const up = onScrape(async () => {
    metrics.eventLogUp.set(0);
    await log.ping();
    metrics.eventLogUp.set(1);
  });
  const depth =
    queue === undefined
      ? () => undefined
      : onScrape(async () => {
          const s = await queue.stats();
          s.queuedByBand.forEach((n, i) => {
            metrics.runsQueued.set({ band: String(i + 1) }, n);
          });
          metrics.approvalsPending.set({ where: "paused" }, s.paused);
        });
  return () => {
    up();
    depth();
  };
}
