/**
 * The retention sweeper's deletion: the deletion primitive (lifecycle/delete-run.ts) as a
 * run of any tenant, by "retention", its answers turned into what the sweeper does next.
 * A run deleted for retention keeps its tombstone as long as its retention again (at most
 * the primitive's 7 days): it ended that long before, so no straggling writer is left, and a
 * tombstone per deleted run kept a week would grow Redis with the run rate — the one thing
 * retention is for.
 *
 * Must never: report "deleted" for a run this call did not delete, or swallow an error other
 * than the primitive's "no such run" and "live" answers (the sweeper counts and retries it).
 */
import { isAgentdError } from "../errors.ts";
import { deleteRun, type RunDeletionDeps, TOMBSTONE_KEEP_MS } from "../lifecycle/delete-run.ts";
import type { DeleteForRetention } from "./port.ts";

/** The reason recorded in a retention deletion's tombstone. */
export const RETENTION_REASON = "retention: ended longer ago than the tenant's retention";

/**
 * `beforeDelete`: what must succeed before a run is removed (the archive, `--archive-dir`);
 * a throw keeps the run, and the sweeper counts the error and retries at a later sweep.
 */
export function deleteForRetention(
  deps: RunDeletionDeps,
  beforeDelete?: (tenantId: string, runId: string) => Promise<void>,
): DeleteForRetention {
  return async (tenantId, runId, retentionMs) => {
    const keep = Math.min(deps.tombstoneKeepMs ?? TOMBSTONE_KEEP_MS, retentionMs);
    try {
      // Its feed entries are left to the feed's trims (this sweeper's time trim, the length
      // cap): a sweep deletes runs by the thousand, and searching the feed for each one's
      // entries read up to 5,000 entries a run (bench/retention-soak.ts fell behind).
      const r = await deleteRun(
        { ...deps, tombstoneKeepMs: keep, dropFeedEntries: false },
        { runId, tenantId, by: "retention", reason: RETENTION_REASON },
        beforeDelete === undefined ? {} : { beforeDelete },
      );
      return r.began ? "deleted" : "gone";
    } catch (err) {
      if (isAgentdError(err) && err.code === "ENOTFOUND") return "gone";
      if (isAgentdError(err) && err.code === "ECONFLICT") return "live";
      throw err;
    }
  };
}
