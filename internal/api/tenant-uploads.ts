/**
 * Per-tenant turns for UploadWorkspace streams on one server: a tenant holds at most `max`
 * streams open at once (`--max-uploads-per-tenant`); one more is refused at once with
 * RESOURCE_EXHAUSTED naming the limit, before any of its bytes is read. One tenant's many
 * slow streams cannot crowd the server's uploads out for the others.
 *
 * Must never: count a stream twice, or keep a turn after its stream ended.
 */
import { AgentdError } from "../errors.ts";

export interface TenantUploads {
  /** Takes a turn for `tenantId` (EBUSY when it holds `max` already); call the result to give it back. */
  take(tenantId: string): () => void;
  /** Streams open for `tenantId`. */
  open(tenantId: string): number;
}

/** Turns of at most `max` (at least 1) per tenant; `setting` names the limit in refusals. */
export function createTenantUploads(max: number, setting: string): TenantUploads {
  if (!Number.isInteger(max) || max < 1)
    throw new RangeError(`max uploads per tenant must be a positive integer, got ${max}`);
  const open = new Map<string, number>();
  return {
    open: (tenantId) => open.get(tenantId) ?? 0,
    take(tenantId) {
      const n = open.get(tenantId) ?? 0;
      if (n >= max)
        throw new AgentdError(
          "EBUSY",
          `tenant ${tenantId} already has ${n} workspace uploads open on this server (at most ${max}, the server's ${setting}); finish one first`,
        );
      open.set(tenantId, n + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (open.get(tenantId) ?? 1) - 1;
        if (left <= 0) open.delete(tenantId);
        else open.set(tenantId, left);
      };
    },
  };
}
