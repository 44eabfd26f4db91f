/**
 * Adaptive trust: per-repository counters derived from events (successful calls, failed
 * calls, reverted patches, manual overrides, per tool), and the policy rules that relax or
 * tighten approval on them. The counters are a projection: they can always be recomputed
 * from the log, and are cached briefly so a decision costs no I/O.
 */
import type { Event } from "../gen/agentd/v1/events_pb.js";
import type { CapabilityName, Policy, TrustRuleConfig } from "./policy-schema.ts";

export interface ToolCounters {
  successfulCalls: number;
  failedCalls: number;
  revertedPatches: number;
  manualOverrides: number;
}

export type TrustCounters = Partial<Record<string, ToolCounters>>;

const ZERO: ToolCounters = {
  successfulCalls: 0,
  failedCalls: 0,
  revertedPatches: 0,
  manualOverrides: 0,
};

/** The only event types foldTrust looks at: readers may skip (and never decode) the rest. */
export const TRUST_EVENT_TYPES: ReadonlySet<string> = new Set([
  "tool.call",
  "tool.result",
  "approval.requested",
  "approval.resolved",
]);

/** Folds one run's events into `into` (mutated). Policy denials and interruptions count as neither success nor failure. */
export function foldTrust(into: TrustCounters, events: Iterable<Event>): TrustCounters {
  const toolOf = new Map<string, string>();
  const approvalTool = new Map<string, string>();
  const patches: { path: string; added: string[]; removed: string[] }[] = [];
  const bump = (tool: string, k: keyof ToolCounters): void => {
    into[tool] ??= { ...ZERO };
    (into[tool] as ToolCounters)[k]++;
  };
  for (const ev of events) {
    const p = ev.payload;
    if (p.case === "toolCall") toolOf.set(p.value.callId, p.value.tool);
    else if (p.case === "approvalRequested")
      approvalTool.set(
        p.value.approvalId,
        p.value.tool === "network" ? networkTrustKey(p.value.preview?.host ?? "") : p.value.tool,
      );
    else if (p.case === "approvalResolved") {
      // A person said no to what the agent (and the policy) proposed: a manual override.
      const tool = approvalTool.get(p.value.approvalId);
      if (tool && p.value.decision === 2 && p.value.resolvedBy !== "expiry")
        bump(tool, "manualOverrides");
      // A host a person let a run reach: counted for network.trust.
      if (tool?.startsWith("network:") && p.value.decision === 1) bump(tool, "successfulCalls");
    } else if (p.case === "toolResult") {
      const tool = toolOf.get(p.value.callId);
      if (tool === undefined) continue;
      const code = p.value.error?.code ?? "";
      // Refusals and interruptions say nothing about how well the tool works here.
      if (REFUSALS.has(code)) continue;
      const ok = p.value.ok && (p.value.exitCode ?? 0) === 0;
      bump(tool, ok ? "successfulCalls" : "failedCalls");
      if (tool === "repo.patch" && p.value.ok) {
        const change = diffLines(p.value.outputJson);
        if (change !== undefined) {
          // A patch that exactly undoes an earlier one of the same file is a revert.
          if (
            patches.some(
              (q) =>
                q.path === change.path &&
                same(q.added, change.removed) &&
                same(q.removed, change.added),
            )
          ) {
            bump(tool, "revertedPatches");
          }
          patches.push(change);
        }
      }
    }
  }
  return into;
}

/**
 * The counters of a host's network approvals in the repository: successfulCalls = times a
 * person approved it, manualOverrides = times a person denied it.
 */
export const networkTrustKey = (host: string): string => `network:${host.toLowerCase()}`;

const REFUSALS = new Set([
  "EPOLICY",
  "EVALIDATION",
  "interrupted",
  "cancelled",
  "EAPPROVAL_DENIED",
]);

function diffLines(
  outputJson: string,
): { path: string; added: string[]; removed: string[] } | undefined {
  try {
    // A previewed call's output is { preview, result }: the patch is the result.
    const doc = JSON.parse(outputJson) as { result?: unknown };
    const o = (doc.result ?? doc) as { path?: string; diff?: string };
    if (typeof o.path !== "string" || typeof o.diff !== "string") return undefined;
    const added: string[] = [];
    const removed: string[] = [];
    for (const l of o.diff.split("\n")) {
      if (l.startsWith("+++") || l.startsWith("---")) continue;
      if (l.startsWith("+")) added.push(l.slice(1));
      else if (l.startsWith("-")) removed.push(l.slice(1));
    }
    return { path: o.path, added, removed };
  } catch {
    return undefined;
  }
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function holds(
  c: { gte?: number | undefined; lte?: number | undefined } | undefined,
  v: number,
): boolean {
  return (
    c === undefined || ((c.gte === undefined || v >= c.gte) && (c.lte === undefined || v <= c.lte))
  );
}

/** The trust rules of `policy` for `tool` whose conditions hold on `counters`. */
export function matchingTrustRules(
  policy: Policy,
  tool: string,
  counters: TrustCounters,
): TrustRuleConfig[] {
  const c = counters[tool] ?? ZERO;
  return policy.trust.rules.filter(
    (r) =>
      r.tool === (tool as CapabilityName) &&
      holds(r.when.successfulCalls, c.successfulCalls) &&
      holds(r.when.failedCalls, c.failedCalls) &&
      holds(r.when.revertedPatches, c.revertedPatches) &&
      holds(r.when.manualOverrides, c.manualOverrides),
  );
}
