/** What proposing and applying policy changes need; built by the composition root (cmd/agentd). */
import type { ChosenPolicy } from "../kernel/tenant-policies.ts";
import type { PolicyChangeStore } from "./port.ts";

export interface PolicyChangesDeps {
  store: PolicyChangeStore;
  /** The policy in force for a tenant, and its file (TenantPolicies.forTenant). */
  chosen(tenantId: string): ChosenPolicy;
  /** Re-reads the policy files now (and announces policy.changed), after an apply. */
  reload(): void;
  /** Adds a notice to the tenant feed (EventLog.publish). */
  publish(tenantId: string, runId: string, json: string): Promise<void>;
  /** Clock, for tests. */
  now?: () => number;
}
