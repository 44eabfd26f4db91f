/**
 * `policy.changed` notices: after a reload (SIGHUP, a policy file changed, the auth file
 * reloaded) each tenant's effective policy digest is compared with the one this process
 * last enforced for it, and each tenant whose digest moved gets one notice in its feed
 * (EventLog.publish), naming the old and new digest, the source and the file. A change of
 * the server's file reaches every tenant without a file of its own; a tenant's own file
 * only that tenant.
 *
 * Every process that enforces policy (server, each worker) reloads on its own and writes
 * its own notice, with `reporter` naming it: one change appears once per process, and
 * (tenant, old digest, new digest) identifies it. That is the truth (each process did
 * switch), and it lets an operator see a rollout reach every worker.
 *
 * Must never: write a notice for a reload that changed nothing (a re-save, a reformat, a
 * reload that failed and kept the last good policy), or write one twice in one process
 * for the same switch.
 */

import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { sealEvent } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { PolicyChangedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Logger } from "../telemetry/logger.ts";
import { policySourceEnum } from "./decision-provenance.ts";
import { policyDigest } from "./policy-digest.ts";
import type { ChosenPolicy } from "./tenant-policies.ts";

export interface PolicyChangesOptions {
  /** The tenants this process knows (the auth file's tenants and tokens). */
  tenants: () => Iterable<string>;
  /** The policy in force for a tenant now (TenantPolicies.forTenant). */
  effective: (tenantId: string) => ChosenPolicy;
  /** Adds a notice to the tenant feed (EventLog.publish). */
  publish: (tenantId: string, runId: string, json: string) => Promise<void>;
  /** This process, e.g. "worker host-1/4242". */
  reporter: string;
  logger: Pick<Logger, "info" | "error">;
  /** Clock, for tests. */
  now?: () => number;
}

export interface PolicyChanges {
  /**
   * Compares every known tenant's effective digest with the last one seen and publishes a
   * notice for each that moved; resolves when they are written. A tenant seen for the
   * first time is recorded, not announced (nothing changed for it by a reload).
   */
  check(): Promise<void>;
}

/** The canonical JSON of a `policy.changed` notice (seq 0: no run log holds it). */
export function policyChangedNotice(n: {
  tenantId: string;
  oldDigest: string;
  chosen: ChosenPolicy;
  reporter: string;
  at: number;
}): string {
  const value = create(PolicyChangedSchema, {
    tenantId: n.tenantId,
    oldDigest: n.oldDigest,
    newDigest: policyDigest(n.chosen.policy),
    source: policySourceEnum(n.chosen.source),
    policyFile: basename(n.chosen.path),
    reporter: n.reporter,
    changedAt: timestampFromMs(n.at),
  });
  return sealEvent(
    { runId: "", sessionId: "", payload: { case: "policyChanged", value } },
    0,
    GENESIS_HASH,
    n.at,
  ).json;
}

/** Takes the digests in force now as the baseline (no notices for the start). */
export function createPolicyChanges(opts: PolicyChangesOptions): PolicyChanges {
  const now = opts.now ?? Date.now;
  const seen = new Map<string, string>();
  const digestOf = (t: string) => policyDigest(opts.effective(t).policy);
  for (const t of opts.tenants()) seen.set(t, digestOf(t));
  // Checks run one after another: two reloads in a row must not both announce one switch.
  let chain: Promise<void> = Promise.resolve();
  const checkOnce = async (): Promise<void> => {
    const writes: Promise<void>[] = [];
    for (const tenantId of new Set(opts.tenants())) {
      const chosen = opts.effective(tenantId);
      const digest = policyDigest(chosen.policy);
      const old = seen.get(tenantId);
      seen.set(tenantId, digest);
      if (old === undefined || old === digest) continue;
      const json = policyChangedNotice({
        tenantId,
        oldDigest: old,
        chosen,
        reporter: opts.reporter,
        at: now(),
      });
      opts.logger.info(
        { tenant: tenantId, from: old, to: digest, source: chosen.source },
        "policy changed for tenant",
      );
      writes.push(
        opts.publish(tenantId, "", json).catch((err: unknown) => {
          opts.logger.error({ err, tenant: tenantId }, "policy.changed could not be written");
          // The next check tries again (unless the policy moved on meanwhile).
          if (seen.get(tenantId) === digest) seen.set(tenantId, old);
        }),
      );
    }
    await Promise.all(writes);
  };
  return {
    check() {
      // Never rejects: a reload's notice failing must not end the process (callers `void` it).
      chain = chain.then(checkOnce).catch((err: unknown) => {
        opts.logger.error({ err }, "policy.changed: comparing the policies in force failed");
      });
      return chain;
    },
  };
}
