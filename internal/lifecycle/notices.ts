/**
 * The feed notices of deletions: `run.deleted` (who, why, when, how the run ended) and
 * `tenant.purged`, sealed like any event (id, time, hash over the canonical JSON) but held
 * by the log-wide feed itself (EventLog.publish): the run's own log is what was deleted.
 *
 * Must never: carry the run's content (prompt, labels, events, artifacts).
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { sealEvent } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { RunDeletedSchema, TenantPurgedSchema } from "../gen/agentd/v1/events_pb.js";
import type { RunTombstone } from "./port.ts";

/** The canonical JSON of a run's `run.deleted` notice (seq 0: no run log holds it). */
export function runDeletedNotice(t: RunTombstone): string {
  const value = create(RunDeletedSchema, {
    deletedBy: t.by,
    reason: t.reason,
    deletedAt: timestampFromMs(t.at),
    ended: t.ended,
  });
  return sealEvent(
    { runId: t.runId, sessionId: "", payload: { case: "runDeleted", value } },
    0,
    GENESIS_HASH,
    t.at,
  ).json;
}

/** The canonical JSON of a tenant's `tenant.purged` notice. */
export function tenantPurgedNotice(p: {
  tenantId: string;
  by: string;
  reason: string;
  runsDeleted: number;
  at: number;
}): string {
  const value = create(TenantPurgedSchema, {
    tenantId: p.tenantId,
    purgedBy: p.by,
    reason: p.reason,
    runsDeleted: BigInt(p.runsDeleted),
    purgedAt: timestampFromMs(p.at),
  });
  return sealEvent(
    { runId: "", sessionId: "", payload: { case: "tenantPurged", value } },
    0,
    GENESIS_HASH,
    p.at,
  ).json;
}
