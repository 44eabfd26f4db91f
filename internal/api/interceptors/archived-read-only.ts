/**
 * Refuses, by name, every write to a run served read-only from its archive
 * (`--archive-dir`, archive/archive-fallback-log.ts): ResolveApproval, OverrideReview,
 * CancelRun and DeleteRun of an archived run answer FAILED_PRECONDITION saying the run is archived.
 * Another tenant's archived run is left to the handler (NOT_FOUND, as for any foreign run).
 * Must never: refuse a call about a run the live log holds.
 */
import type { Interceptor } from "@connectrpc/connect";
import { archivedReadOnly } from "../../archive/archive-fallback-log.ts";
import type { OpenedArchive } from "../../archive/open-archive.ts";
import { runIdOfApproval } from "../../projections/approvals.ts";
import { kPrincipal } from "../context.ts";

/** Finds a run's archive when the live log does not hold the run. */
export interface ArchivedRuns {
  archivedRun(runId: string): Promise<OpenedArchive | undefined>;
}

/** The run a write names, by RPC; undefined for reads and for RPCs that name none. */
function runOfWrite(method: string, message: Record<string, unknown>): string | undefined {
  switch (method) {
    case "ResolveApproval":
      return runIdOfApproval(String(message.approvalId ?? ""));
    case "OverrideReview":
      return runIdOfApproval(String(message.approvalId ?? "")) ?? String(message.runId ?? "");
    case "CancelRun":
    case "DeleteRun":
      return typeof message.runId === "string" ? message.runId : undefined;
    default:
      return undefined;
  }
}

export function archivedReadOnlyInterceptor(archives: ArchivedRuns): Interceptor {
  return (next) => async (req) => {
    if (!req.stream) {
      const runId = runOfWrite(req.method.name, req.message as unknown as Record<string, unknown>);
      if (runId !== undefined && runId !== "") {
        const a = await archives.archivedRun(runId);
        const caller = req.contextValues.get(kPrincipal);
        if (a !== undefined && caller?.tenantId === a.head.tenantId)
          throw archivedReadOnly(runId, req.method.name);
      }
    }
    return next(req);
  };
}
