/**
 * Why a queued run has not started, as GetRun and ListRuns say it (Run.held_by and
 * held_message): the queue's gate (session or tenant slot) named as the limit an operator
 * sets. Must never: read or change the queue itself (the caller passes the gate it read), or
 * name a limit the run is not held by.
 */
import type { QueuePosition } from "../scheduler/port.ts";
import type { TenantConcurrency } from "../scheduler/tenant-limits.ts";

export interface HoldReason {
  heldBy: string;
  heldMessage: string;
}

/** The hold of a waiting run; undefined when nothing holds it. */
export function holdReason(
  gate: QueuePosition["gate"],
  tenantId: string,
  concurrency: TenantConcurrency | undefined,
): HoldReason | undefined {
  if (gate === "session")
    return {
      heldBy: "session",
      heldMessage: "an earlier run of its session has not ended; this run starts after it",
    };
  if (gate !== "tenant") return undefined;
  const c = concurrency ?? { limit: 0, source: "server" };
  const runs = c.limit === 1 ? "run" : "runs";
  if (c.source === "tenant")
    return {
      heldBy: "tenant.concurrentRuns",
      heldMessage: `tenant ${tenantId} has ${c.limit} concurrent ${runs} running or starting, its limit (tenants.${tenantId}.limits.concurrentRuns in the auth file); this run starts when one of them ends`,
    };
  return {
    heldBy: "server.tenantLimit",
    heldMessage: `tenant ${tenantId} has ${c.limit} concurrent ${runs} running or starting, the server's limit per tenant (--tenant-limit); this run starts when one of them ends`,
  };
}
