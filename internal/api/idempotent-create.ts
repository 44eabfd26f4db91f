/**
 * CreateRun with an idempotency key: the key is claimed for a new run id before the run is
 * appended; a request that finds the key claimed by the same request gets that run, by a
 * different one ALREADY_EXISTS. A claim whose run never appeared (its server died between
 * the claim and the append) is taken over once it is older than STALE_CLAIM_MS.
 *
 * Must never: create a second run for a key, answer with a run of another tenant, or
 * leave a claim of this request behind when its run could not be created.
 */
import { createHash } from "node:crypto";
import { ulid } from "ulid";
import { AgentdError, invalid } from "../errors.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import type { IdempotencyStore } from "../idempotency/port.ts";
import type { ApiDeps } from "./deps.ts";

const KEY_RE = /^[A-Za-z0-9._:/+=-]{1,255}$/;
/** A claim without its run for this long belongs to a CreateRun that died. */
export const STALE_CLAIM_MS = 30_000;
/** How long a request waits for a claim's run to appear before answering UNAVAILABLE. */
const WAIT_FOR_RUN_MS = 5_000;

export function idempotencyKeyField(key: string): void {
  if (key !== "" && !KEY_RE.test(key))
    throw invalid("idempotency_key", "must be 1-255 characters of [A-Za-z0-9._:/+=-]");
}

/** sha256 of what makes two requests the same (the workspace by its stored digest). */
export function requestDigest(r: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(r)).digest("hex");
}

export type Claimed =
  | { kind: "new"; runId: string; release: () => Promise<void> }
  | { kind: "existing"; run: Run };

/** Claims `key` for a new run id, or finds the run it already names. */
export async function claimRun(
  deps: ApiDeps,
  store: IdempotencyStore,
  tenantId: string,
  key: string,
  digest: string,
  signal: AbortSignal,
): Promise<Claimed> {
  const runId = ulid();
  const mine = { runId, digest };
  const release = () => store.release(tenantId, key, runId).catch(() => undefined);
  for (let attempt = 0; attempt < 3; attempt++) {
    const held = await store.claim(tenantId, key, mine);
    if (held === undefined) return { kind: "new", runId, release };
    if (held.deleted === true)
      throw new AgentdError(
        "ENOTFOUND",
        "idempotency_key: the run this key created was deleted (keys are kept 24 h); use a new key",
        { field: "idempotency_key" },
      );
    if (held.digest !== digest)
      throw new AgentdError(
        "EEXISTS",
        `idempotency_key: already used by run ${held.runId} for a different request (keys are kept 24 h)`,
        { field: "idempotency_key" },
      );
    const run = await waitForRun(deps, tenantId, held.runId, held.at, signal);
    if (run !== undefined) return { kind: "existing", run };
    // Its CreateRun died before the run existed: take the key over.
    if (await store.replace(tenantId, key, held.runId, mine))
      return { kind: "new", runId, release };
  }
  throw new AgentdError("ECONFLICT", "idempotency_key: claimed and released repeatedly; retry");
}

/** The claim's run once it exists; undefined when its claim is stale without it. */
async function waitForRun(
  deps: ApiDeps,
  tenantId: string,
  runId: string,
  claimedAt: number,
  signal: AbortSignal,
): Promise<Run | undefined> {
  const deadline = Date.now() + WAIT_FOR_RUN_MS;
  for (;;) {
    const head = await deps.log.head(runId);
    if (head !== undefined) {
      // A key is per tenant, so its run is the tenant's: anything else is corruption.
      if (head.tenantId !== tenantId) throw new AgentdError("EIO", "idempotency key mismatch");
      const run = await deps.runs.get(runId, head);
      if (run !== undefined) return run;
    }
    if (Date.now() - claimedAt >= STALE_CLAIM_MS) return undefined;
    if (Date.now() >= deadline || signal.aborted)
      throw new AgentdError(
        "EUNAVAILABLE",
        "idempotency_key: a CreateRun with this key is still in progress; retry",
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}
