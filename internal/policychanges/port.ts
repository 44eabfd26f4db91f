/**
 * Pending policy changes: rules people asked for when approving a call (ResolveApproval
 * propose_rule), kept durably per tenant until an admin applies or rejects them. Two
 * adapters pass one conformance suite (conformance.ts): Redis (every server of a
 * deployment) and a file beside the embedded log (`agentd dev`).
 *
 * Must never: lose an acknowledged change across a restart, settle a change twice (apply
 * and reject, or two admins applying at once: exactly one `settle` wins), or list one
 * tenant's changes to another.
 */

/** The rule, as the server derived it from the approved call. */
export type StoredRule =
  | { kind: "command"; command: string; repo: string }
  | { kind: "host"; host: string };

export type ChangeState = "pending" | "applied" | "rejected";

export interface StoredPolicyChange {
  /** "pc_" and 20 hex digits (policy-change-id.ts). */
  id: string;
  tenantId: string;
  state: ChangeState;
  rule: StoredRule;
  /** The approver (token name). */
  proposedBy: string;
  approvalId: string;
  runId: string;
  callId: string;
  /** The absolute path of the policy file the diff is against. */
  path: string;
  /** The tenant had no policy file of its own (`path` is the server's). */
  needsTenantFile: boolean;
  /** Unified diff of the file. */
  diff: string;
  /** sha256 (hex) of the file's bytes the diff was made against. */
  baseSha256: string;
  /** The whole file after the change (what ApplyPolicyChange writes). */
  newText: string;
  /** ms since the epoch. */
  proposedAt: number;
  settledAt?: number;
  settledBy?: string;
  reason?: string;
  /** APPLIED: the policy digests before and after. */
  oldDigest?: string;
  newDigest?: string;
}

/** How a pending change ends. */
export interface Settlement {
  state: "applied" | "rejected";
  by: string;
  at: number;
  reason?: string;
  oldDigest?: string;
  newDigest?: string;
}

export interface PolicyChangeStore {
  /** Stores `c` (pending) unless its id exists: then answers the stored one, unchanged. */
  propose(c: StoredPolicyChange): Promise<StoredPolicyChange>;
  get(id: string): Promise<StoredPolicyChange | undefined>;
  /** Newest first; one tenant's, or every tenant's (undefined). At most `limit` (default 500). */
  list(tenantId: string | undefined, limit?: number): Promise<StoredPolicyChange[]>;
  /**
   * Settles a pending change: the settled change, or undefined when it was not pending
   * (settled by someone else first, or unknown). Atomic: of two racing calls one wins.
   */
  settle(id: string, s: Settlement): Promise<StoredPolicyChange | undefined>;
  /**
   * Makes a settled change pending again when it is still settled by `s` (an apply whose
   * file write failed after it won). Answers whether it did.
   */
  reopen(id: string, s: Settlement): Promise<boolean>;
  /**
   * Removes every change of the tenant, whatever its state (PurgeTenant: a change holds a
   * command and run ids of the tenant's). Answers how many went. Idempotent.
   */
  dropTenant(tenantId: string): Promise<number>;
}

/** The stored change with `s` applied. */
export function settled(c: StoredPolicyChange, s: Settlement): StoredPolicyChange {
  return {
    ...c,
    state: s.state,
    settledBy: s.by,
    settledAt: s.at,
    ...(s.reason === undefined ? {} : { reason: s.reason }),
    ...(s.oldDigest === undefined ? {} : { oldDigest: s.oldDigest }),
    ...(s.newDigest === undefined ? {} : { newDigest: s.newDigest }),
  };
}

/** A stored record read back: the fields every reader relies on, or undefined. */
export function parseStored(v: unknown): StoredPolicyChange | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const c = v as Partial<StoredPolicyChange>;
  if (
    typeof c.id !== "string" ||
    typeof c.tenantId !== "string" ||
    (c.state !== "pending" && c.state !== "applied" && c.state !== "rejected") ||
    typeof c.rule !== "object" ||
    c.rule === null ||
    typeof c.path !== "string" ||
    typeof c.newText !== "string" ||
    typeof c.baseSha256 !== "string" ||
    !Number.isFinite(c.proposedAt)
  )
    return undefined;
  return c as StoredPolicyChange;
}
