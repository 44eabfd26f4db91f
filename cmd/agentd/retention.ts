/**
 * Wiring of the retention sweeper (internal/retention) for `agentd server` and `agentd dev`:
 * the ended-run index (on the event log's Redis, or read from the embedded log), the run
 * deletion of internal/lifecycle (the one DeleteRun uses), the tenants' retention from the
 * auth file (re-read with it), the counters. Workers never sweep: they have no auth file, so
 * they cannot know a tenant's override.
 *
 * Must never: sweep with a retention other than the tenant's override, else the server's
 * (with neither, the tenant's runs are kept: retention is off by default).
 */
import type { Redis } from "ioredis";
import type { Authenticator } from "../../internal/auth/tokens.ts";
import type { RunDeletionDeps } from "../../internal/lifecycle/delete-run.ts";
import { deleteForRetention } from "../../internal/retention/delete-for-retention.ts";
import {
  type EndedRunSource,
  FileEndedRunIndex,
} from "../../internal/retention/file-ended-index.ts";
import type { EndedRunIndex } from "../../internal/retention/port.ts";
import { RedisEndedRunIndex } from "../../internal/retention/redis-ended-index.ts";
import { createRetentionSweeper, startRetentionSweep } from "../../internal/retention/sweeper.ts";
import type { Logger } from "../../internal/telemetry/logger.ts";
import { metrics } from "../../internal/telemetry/metrics.ts";

export interface RetentionWiring {
  /** --retention in ms; undefined: off (tenants' overrides still apply). */
  retentionMs: number | undefined;
  sweepMs: number;
  /** Where ended runs are found: the event log's Redis, else the embedded log. */
  store: { redis: Redis; prefix: string } | { embedded: EndedRunSource };
  auth: Authenticator;
  /** The process's run deletion (internal/lifecycle), as DeleteRun uses it. */
  deletion: RunDeletionDeps;
  /** Archives a run before it is deleted (`--archive-dir`); absent: no archive. */
  beforeDelete?: (tenantId: string, runId: string) => Promise<void>;
  logger: Logger;
}

/** Starts the sweep; stop() awaits a sweep in progress. */
export function startRetention(w: RetentionWiring): { stop(): Promise<void> } {
  let index: EndedRunIndex;
  let client: Redis | undefined;
  if ("redis" in w.store) {
    // Its own connection: a sweep's range reads and backfill scans never queue ahead of appends.
    client = w.store.redis.duplicate();
    client.on("error", () => undefined); // reconnects by itself; a failed tick is retried
    index = new RedisEndedRunIndex({ client, prefix: w.store.prefix });
  } else index = new FileEndedRunIndex(w.store.embedded);
  const sweeper = createRetentionSweeper({
    index,
    deleteRun: deleteForRetention(w.deletion, w.beforeDelete),
    retentionOf: (t) => w.auth.tenantConfig(t).retentionMs ?? w.retentionMs,
    serverRetentionMs: w.retentionMs,
    logger: w.logger,
    onDeleted: (n) => metrics.retentionRunsDeleted.inc(n),
    onError: () => metrics.retentionSweepErrors.inc(),
  });
  w.logger.info(
    { retention: w.retentionMs === undefined ? "off" : `${w.retentionMs}ms`, everyMs: w.sweepMs },
    "retention sweeper started (tenants' overrides from the auth file apply)",
  );
  const sweep = startRetentionSweep(sweeper, w.sweepMs);
  return {
    async stop() {
      await sweep.stop();
      client?.disconnect();
    },
  };
}
