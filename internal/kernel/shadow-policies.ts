/**
 * Which candidate (shadow) policy a tenant's calls are also evaluated against: the tenant's
 * own (`tenants.<id>.shadowPolicy` in the auth file), else the server's (--shadow-policy),
 * but the server's only for a tenant whose enforced policy is the server's (a candidate is
 * compared with the policy it would replace). Loaded and reloaded like the enforced files
 * (tenant-policies.ts, policy-store.ts): a broken file refuses the start naming the file and
 * field; a broken reload keeps the last good candidate and logs why.
 *
 * Must never: decide anything (the kernel reads it for policy.shadow only), or fall back
 * to the enforced policy as a candidate (no candidate: no shadow events).
 */
import type { Logger } from "../telemetry/logger.ts";
import type { PolicyStore } from "./policy-store.ts";
import { type ChosenPolicy, createTenantPolicies, type TenantPolicies } from "./tenant-policies.ts";

export interface ShadowPolicies {
  /** The candidate for `tenantId` now, given whose policy is enforced; undefined: none. */
  forTenant(tenantId: string, enforced: "tenant" | "server"): ChosenPolicy | undefined;
  /** True when the tenant names a candidate file of its own. */
  hasOwn(tenantId: string): boolean;
  sync(): void;
  reload(): void;
  close(): void;
}

export interface ShadowPoliciesOptions {
  /** The server's candidate (--shadow-policy); undefined: none. */
  server: PolicyStore | undefined;
  /** The server's enforced policy (the tenant loader's fallback, never returned here). */
  enforced: PolicyStore;
  /** Tenant id → absolute path of its candidate file, as the auth file says now. */
  files: () => ReadonlyMap<string, string>;
  logger: Pick<Logger, "info" | "error">;
  watch?: (path: string, onChange: () => void) => { close(): void } | undefined;
}

/** Loads every tenant's candidate file (throws EVALIDATION naming `tenants.<id>.shadowPolicy`). */
export function createShadowPolicies(opts: ShadowPoliciesOptions): ShadowPolicies {
  const tenants: TenantPolicies = createTenantPolicies({
    server: opts.server ?? opts.enforced,
    files: opts.files,
    logger: opts.logger,
    key: "shadowPolicy",
    ...(opts.watch === undefined ? {} : { watch: opts.watch }),
  });
  return {
    forTenant(tenantId, enforced) {
      const chosen = tenants.forTenant(tenantId);
      if (chosen.source === "tenant") return chosen;
      if (opts.server === undefined || enforced !== "server") return undefined;
      return chosen;
    },
    hasOwn: (tenantId) => tenants.forTenant(tenantId).source === "tenant",
    sync: () => tenants.sync(),
    reload: () => {
      opts.server?.reload();
      tenants.reload();
    },
    close: () => tenants.close(),
  };
}
