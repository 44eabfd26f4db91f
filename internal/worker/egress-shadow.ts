/**
 * Shadow mode for a run's egress: the candidate policy's `network` section judges each
 * connection beside the enforced one (run-egress.ts `shadow`); a connection it would have
 * allowed, asked for or refused differently is a `policy.shadow` (tool "network", summary
 * `connect HOST:PORT`), appended to the run's log like a call's and counted once appended.
 *
 * Must never: change or delay a connection (the record is appended in the background and
 * awaited with the drive's other network records), or fail the drive for the candidate.
 */
import type { RunEgressOptions, ShadowSideOutcome } from "../egress/run-egress.ts";
import type { ControlPath, Decision } from "../kernel/decide.ts";
import { countShadow, type ShadowRecord, shadowEvent } from "../kernel/shadow-record.ts";
import type { Drive } from "./drive.ts";
import { networkOf, track } from "./drive-egress.ts";

/** The egress' shadow option for a drive whose kernel has a candidate; undefined if none. */
export function egressShadow(d: Drive): RunEgressOptions["shadow"] | undefined {
  if (d.deps.kernel.shadowSides === undefined) return undefined;
  return {
    network: () => {
      const sides = d.deps.kernel.shadowSides?.();
      if (sides === undefined) return undefined;
      const p = sides.candidate.policy;
      return p.sandbox.network === "none" ? "none" : networkOf(p);
    },
    differs: (s) => {
      const sides = d.deps.kernel.shadowSides?.();
      if (sides === undefined) return;
      const record: ShadowRecord = {
        callId: s.callId,
        tool: "network",
        enforced: { ...sides.enforced, decision: decisionOf(s.enforced) },
        candidate: { ...sides.candidate, decision: decisionOf(s.candidate) },
        summary: `connect ${s.host}:${s.port}`.slice(0, 600),
        redact: (t) => t, // the writer redacts the run's secrets from every append
        tenant: sides.tenant,
      };
      const appended = d.writer.append(shadowEvent(record)).then(
        () => countShadow(record),
        (err: unknown) =>
          d.deps.logger?.warn({ runId: d.runId, err }, "policy.shadow not recorded"),
      );
      track(d, appended);
    },
  };
}

const PATH: Record<ShadowSideOutcome["decision"], ControlPath> = {
  allowed: "auto",
  approved: "auto",
  trusted: "auto",
  pending: "preview+approval",
  denied: "deny",
};

/** A connection's outcome as a decision. */
function decisionOf(o: ShadowSideOutcome): Decision {
  return { path: PATH[o.decision], rule: o.rule, reason: o.reason, trustAdjustments: [] };
}
