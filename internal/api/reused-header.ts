/**
 * The response header of CreateRun that says the run already existed: the request carried
 * an idempotency key that an earlier, identical request used, so no run was created.
 * Informational only; clients must never rely on it for correctness (the run id is the
 * same either way).
 */
export const RUN_REUSED_HEADER = "agentd-run-reused";
