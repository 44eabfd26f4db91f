/**
 * Idempotency keys of CreateRun: per tenant, a key names the run its first request
 * created and a digest of that request, for 24 hours. A claim is atomic across servers
 * (Redis) or within the one process of the embedded log (file).
 *
 * Must never: let two claims of one key both succeed, or keep a key past its time.
 */

/** How long a key is kept. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export interface IdempotencyClaim {
  runId: string;
  /** sha256 of the request (create-run.ts: requestDigest). */
  digest: string;
  /** When the claim was made, ms since the epoch. */
  at: number;
  /**
   * The key's run was deleted (lifecycle/delete-run.ts): the claim keeps no run id, and a
   * request with the key is answered NOT_FOUND until the key expires — never a new run.
   */
  deleted?: boolean;
}

export interface IdempotencyStore {
  /** Claims `key` for `c.runId`: undefined when claimed now, else the claim that holds it. */
  claim(
    tenantId: string,
    key: string,
    c: { runId: string; digest: string },
  ): Promise<IdempotencyClaim | undefined>;
  /** Replaces the claim of `prevRunId` by `next`: false when the key names another run now. */
  replace(
    tenantId: string,
    key: string,
    prevRunId: string,
    next: { runId: string; digest: string },
  ): Promise<boolean>;
  /** Drops the claim when it still names `runId` (its CreateRun failed before the run existed). */
  release(tenantId: string, key: string, runId: string): Promise<void>;
  /**
   * The run was deleted: its key (if any) becomes a `deleted` claim without the run id, kept
   * until it would have expired. Idempotent.
   */
  forgetRun(tenantId: string, runId: string): Promise<void>;
}
