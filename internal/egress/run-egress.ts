/**
 * One run's egress, as one drive sees it: the proxy on the run network's gateway, what it
 * admits (the policy's `network` section, re-read for every connection; the hosts a
 * person approved or denied in this run), the call each connection belongs to, the hosts
 * waiting for a person, and credentials added at the proxy for their hosts (TLS
 * terminated there with the run's CA). Every connection is handed to `record` (the
 * drive appends it as a network.request event), and, in shadow mode, judged by the
 * candidate policy too (`shadow`: a different outcome is handed to `differs`).
 *
 * Must never: admit a host the policy does not allow and no person approved, pass a
 * credential value to anything but the upstream it belongs to, or record more than the
 * run's connection limit allows (a sandbox opening connections in a loop cannot flood the
 * log).
 */
import net from "node:net";
import type { NetworkPolicy } from "../kernel/network-schema.ts";
import { networkTrustKey, type TrustCounters } from "../kernel/trust.ts";
import {
  checkDestination,
  type DestinationCheck,
  type HostRule,
  matchRule,
  parseHostRule,
} from "./destination.ts";
import { intercept } from "./intercept.ts";
import {
  type Admission,
  type ConnectionRecord,
  createEgressProxy,
  type DecidedConnection,
} from "./proxy.ts";
import type { RunCa } from "./run-ca.ts";

/** A host waiting for a person: the connection that asked, and the call whose process opened it. */
export interface HostAsk {
  host: string;
  port: number;
  callId: string;
}

/** The call running now (the one whose processes open connections). */
export interface CallInfo {
  callId: string;
  tool: string;
}

export interface EgressLimits {
  /** Connections at once. */
  concurrent: number;
  /** Connections in all per drive. */
  connections: number;
  /** Bytes each way per connection. */
  bytesPerConnection: number;
  /** Bytes in all per drive. */
  bytes: number;
}

export interface RunEgressOptions {
  listen: { host: string; port: number };
  network: () => NetworkPolicy;
  /** host:port keys a person approved (or denied) earlier in the run (from the log). */
  approved: Iterable<string>;
  denied: Iterable<string>;
  limits: EgressLimits;
  record: (r: ConnectionRecord & { callId: string }) => void;
  /**
   * Resolved credential headers per exact host, or host:port when the policy names a port
   * (values never leave this module but upstream).
   */
  credentials?: ReadonlyMap<string, Record<string, string>>;
  /** The run's CA (needed when there are credentials). */
  ca?: RunCa;
  /** The repository's trust counters (network.trust), read when the drive began. */
  trust?: TrustCounters;
  /** Name resolution and upstream trust (tests: local names and a local CA). */
  resolve?: (host: string) => Promise<string[]>;
  upstreamCa?: string | string[];
  idleTimeoutMs?: number;
  connectTimeoutMs?: number;
  /**
   * Shadow mode: the candidate policy's network section, judged beside the enforced one
   * for every connection (with the same approvals and trust), and what to do with a
   * connection they judge differently (allow, ask or deny). Never changes the admission.
   */
  shadow?: {
    /** The candidate's network section, or its `sandbox.network: none` (no network at all). */
    network: () => NetworkPolicy | "none" | undefined;
    differs: (d: ShadowAdmission) => void;
  };
}

/** One side's judgment of a connection: the admission's decision and the rule behind it. */
export interface ShadowSideOutcome {
  decision: Admission["decision"];
  rule: string;
  reason: string;
}

/** A connection the candidate policy would have admitted differently. */
export interface ShadowAdmission {
  host: string;
  port: number;
  callId: string;
  enforced: ShadowSideOutcome;
  candidate: ShadowSideOutcome;
}

export interface RunEgress {
  /** The call whose processes open the connections from now on (undefined: between calls). */
  setCall(call: CallInfo | undefined): void;
  /** The hosts that asked for a person since the last take, once each. */
  takeAsks(): HostAsk[];
  approve(key: string): void;
  deny(key: string): void;
  close(): Promise<void>;
}

export const hostKey = (host: string, port: number): string => `${host}:${port}`;

/** Starts the proxy of one drive on the run network's gateway. */
export async function startRunEgress(opts: RunEgressOptions): Promise<RunEgress> {
  const approved = new Set(opts.approved);
  const denied = new Set(opts.denied);
  const asks = new Map<string, HostAsk>();
  let call: CallInfo | undefined;
  let recorded = 0;
  let closing: Promise<void> | undefined;
  const maxRecords = opts.limits.connections + 100;

  const admit = (host: string, port: number): Admission & { tag: string } => {
    const tag = call?.callId ?? "";
    const a = admission(opts.network(), host, port, { approved, denied }, opts.trust);
    if (a.decision === "pending") {
      const key = hostKey(host, port);
      if (!asks.has(key)) asks.set(key, { host, port, callId: tag });
    }
    return { ...a, tag };
  };

  // After the enforced side's destination check: the candidate is judged the same way (its
  // admission, then the same check on the same addresses), or refuses all under `none`.
  const shadowDecided = (c: DecidedConnection): void => {
    const cn = opts.shadow?.network();
    if (cn === undefined) return;
    const enforced = outcome(opts.network(), c.decision, c.reason);
    const candidate = candidateOutcome(cn, c, { approved, denied }, opts.trust);
    if (classOf(enforced.decision) === classOf(candidate.decision)) return;
    opts.shadow?.differs({ host: c.host, port: c.port, callId: c.tag, enforced, candidate });
  };

  const proxy = createEgressProxy({
    admit,
    ...(opts.shadow === undefined ? {} : { onDecided: shadowDecided }),
    maxConnections: opts.limits.concurrent,
    maxTotalConnections: opts.limits.connections,
    maxBytes: opts.limits.bytesPerConnection,
    maxTotalBytes: opts.limits.bytes,
    ...(opts.resolve === undefined ? {} : { resolve: opts.resolve }),
    ...(opts.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: opts.idleTimeoutMs }),
    ...(opts.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: opts.connectTimeoutMs }),
    intercept: (host, port) => {
      const headers = opts.credentials?.get(hostKey(host, port)) ?? opts.credentials?.get(host);
      const ca = opts.ca;
      if (headers === undefined || ca === undefined) return undefined;
      return (client, first, address, budget) =>
        intercept(client, first, {
          host,
          port,
          address,
          ca,
          headers,
          spend: budget.spend,
          admitRequest: budget.count,
          maxBytes: opts.limits.bytesPerConnection,
          idleTimeoutMs: opts.idleTimeoutMs ?? 60_000,
          connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
          ...(opts.upstreamCa === undefined ? {} : { upstreamCa: opts.upstreamCa }),
        });
    },
    onConnection: (r) => {
      if (recorded++ >= maxRecords) return;
      opts.record({ ...r, callId: r.tag ?? "" });
    },
  });
  await listenRetrying(proxy, opts.listen);
  return {
    setCall: (c) => {
      call = c;
    },
    takeAsks: () => {
      const out = [...asks.values()];
      asks.clear();
      return out;
    },
    approve: (key) => {
      approved.add(key);
      denied.delete(key);
    },
    deny: (key) => {
      denied.add(key);
      approved.delete(key);
    },
    // Once: the drive's end settles it before run.completed, the driver again when it stops.
    close: () => {
      closing ??= proxy.close();
      return closing;
    },
  };
}

/** What a decision amounts to: the connection goes, waits for a person, or is refused. */
function classOf(d: Admission["decision"]): "allow" | "ask" | "deny" {
  if (d === "pending") return "ask";
  if (d === "denied") return "deny";
  return "allow";
}

/** A side's outcome with the rule behind it, in the policy's words. */
function outcome(
  n: NetworkPolicy,
  decision: Admission["decision"],
  reason?: string,
): ShadowSideOutcome {
  const rule =
    decision === "allowed"
      ? "network.allow"
      : decision === "approved"
        ? "network:approved-in-run"
        : decision === "trusted"
          ? "network.trust"
          : reason !== undefined && /address the policy does not name/.test(reason)
            ? "network.private"
            : `network.approval=${n.approval}`;
  return { decision, rule, reason: reason ?? `the connection is admitted (${rule})` };
}

/** The candidate's judgment of a connection the enforced side judged as `c`. */
function candidateOutcome(
  cn: NetworkPolicy | "none",
  c: DecidedConnection,
  run: { approved: ReadonlySet<string>; denied: ReadonlySet<string> },
  trust: TrustCounters | undefined,
): ShadowSideOutcome {
  if (cn === "none")
    return {
      decision: "denied",
      rule: "sandbox.network=none",
      reason: "the candidate gives the sandbox no network",
    };
  const b = admission(cn, c.host, c.port, run, trust);
  if ("reason" in b) return outcome(cn, b.decision, b.reason);
  // Refused before resolving on the enforced side: there are no addresses to check.
  if (!c.resolved) return outcome(cn, b.decision);
  const v = checkDestination(b.check, c.host, c.port, c.addresses);
  return v.ok ? outcome(cn, b.decision) : outcome(cn, "denied", v.reason);
}

/**
 * What the policy and the run's approvals say of host:port. `always` asks a person for
 * every host not yet approved in the run, listed or not; `risk` only for hosts outside the
 * list; `never` refuses those.
 */
export function admission(
  n: NetworkPolicy,
  host: string,
  port: number,
  run: { approved: ReadonlySet<string>; denied: ReadonlySet<string> },
  trust: TrustCounters = {},
): Admission {
  const key = hostKey(host, port);
  const privateAllowed = blockListOf(n.private);
  if (run.denied.has(key))
    return { decision: "denied", reason: `a person denied network access to ${key} in this run` };
  if (run.approved.has(key)) {
    const rule = parseHostRule(key);
    if ("error" in rule) return { decision: "denied", reason: `${key}: ${rule.error}` };
    return { decision: "approved", check: { rules: [rule], privateAllowed } };
  }
  const rules = rulesOf(n.allow);
  const listed = matchRule(rules, host, port) !== undefined;
  if (listed && n.approval !== "always")
    return { decision: "allowed", check: { rules, privateAllowed } };
  if (n.approval === "never")
    return { decision: "denied", reason: `${key} is not in the policy's network.allow` };
  const exact = parseHostRule(key);
  if (!("error" in exact) && trusted(n, host, port, trust))
    return { decision: "trusted", check: { rules: [exact], privateAllowed } };
  if (net.isIP(host) !== 0)
    return {
      decision: "denied",
      reason: `${host} is an address: only host names can be approved (network.private names addresses)`,
    };
  return {
    decision: "pending",
    reason: `${key} needs a person's approval (network.approval: ${n.approval}); a person is asked when this call ends: try again once it is approved`,
  };
}

/** network.trust: a rule matches and people approved the host often enough, never denying it. */
function trusted(n: NetworkPolicy, host: string, port: number, trust: TrustCounters): boolean {
  if (n.trust.length === 0 || net.isIP(host) !== 0) return false;
  const c = trust[networkTrustKey(host)];
  if (c === undefined || c.manualOverrides > 0) return false;
  return n.trust.some((t) => {
    const r = parseHostRule(t.host);
    return (
      !("error" in r) &&
      matchRule([r], host, port) !== undefined &&
      c.successfulCalls >= t.approvals
    );
  });
}

const ruleCache = new WeakMap<readonly string[], HostRule[]>();
function rulesOf(allow: readonly string[]): HostRule[] {
  let r = ruleCache.get(allow);
  if (r === undefined) {
    r = allow.map(parseHostRule).filter((x): x is HostRule => !("error" in x));
    ruleCache.set(allow, r);
  }
  return r;
}

const blockCache = new WeakMap<readonly string[], net.BlockList>();
function blockListOf(entries: readonly string[]): DestinationCheck["privateAllowed"] {
  let b = blockCache.get(entries);
  if (b === undefined) {
    b = new net.BlockList();
    for (const e of entries) {
      const [addr = "", prefix] = e.trim().split("/");
      const type = net.isIPv6(addr) ? "ipv6" : "ipv4";
      if (prefix === undefined) b.addAddress(addr, type);
      else b.addSubnet(addr, Number(prefix), type);
    }
    blockCache.set(entries, b);
  }
  return b;
}

/**
 * Listens on the gateway; a previous drive of the same run in this process may still be
 * letting go of the port (EADDRINUSE): tried again for a few seconds.
 */
async function listenRetrying(
  proxy: { listen(host: string, port: number): Promise<net.AddressInfo> },
  at: { host: string; port: number },
): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await proxy.listen(at.host, at.port);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== "EADDRINUSE" || i >= 20) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
