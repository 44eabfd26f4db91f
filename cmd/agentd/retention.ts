/**
 * Wiring of the retention sweeper (internal/retention) for `agentd server` and `agentd dev`:
 * the ended-run index and the deletion primitive on the event log's Redis, the tenants'
 * retention from the auth file (re-read with it), the counters. Workers never sweep: they
 * have no auth file, so they cannot know a tenant's override.
 *
 * Must never: start a sweeper when no retention is configured anywhere (off is the default),
 * or sweep with a retention other than the tenant's override, else the server's.
 */
import type { Redis } from "ioredis";
import type { ArtifactStore } from "../../internal/artifacts/port.ts";
import type { Authenticator } from "../../internal/auth/tokens.ts";
import type { IdempotencyStore } from "../../internal/idempotency/port.ts";
import { RedisRunDeletion } from "../../internal/lifecycle/redis-run-deletion.ts";
import { deleteForRetention } from "../../internal/retention/delete-for-retention.ts";
import { RedisEndedRunIndex } from "../../internal/retention/redis-ended-index.ts";
import { createRetentionSweeper, startRetentionSweep } from "../../internal/retention/sweeper.ts";
import type { Logger } from "../../internal/telemetry/logger.ts";
import { metrics } from "../../internal/telemetry/metrics.ts";

export interface RetentionWiring {
  /** --retention in ms; undefined: off (tenants' overrides still apply). */
  retentionMs: number | undefined;
  sweepMs: number;
  /** The event log's Redis; undefined for the embedded log. */
  redis: Redis | undefined;
  prefix: string;
  auth: Authenticator;
  idempotency: IdempotencyStore;
  artifacts: ArtifactStore;
  /** Drops a deleted run's cached fold in this process. */
  dropCached: (runId: string) => void;
  logger: Logger;
}

/** Starts the sweep (a handle to stop it), or answers undefined when there is nothing to do. */
export function startRetention(w: RetentionWiring): { stop(): Promise<void> } | undefined {
  if (w.redis === undefined) {
    if (w.retentionMs !== undefined)
      w.logger.warn(
        "--retention is not applied to the embedded event log (file:): its runs are kept",
      );
    return undefined;
  }
  // Its own connection: a sweep's scans and deletions never queue ahead of appends.
  const client = w.redis.duplicate();
  client.on("error", () => undefined); // reconnects by itself; a failed tick is retried
  const store = new RedisRunDeletion({ client, prefix: w.prefix, idempotency: w.idempotency });
  const sweeper = createRetentionSweeper({
    index: new RedisEndedRunIndex({ client, prefix: w.prefix }),
    deleteRun: deleteForRetention({
      store,
      artifacts: [w.artifacts],
      dropCached: w.dropCached,
    }),
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
      client.disconnect();
    },
  };
}
