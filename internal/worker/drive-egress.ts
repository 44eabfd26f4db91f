/**
 * A drive's egress (policy sandbox.network: allowlist): the run's proxy on its network's
 * gateway (internal/egress/run-egress.ts), started once the container is there and closed
 * with the drive; each connection appended as a network.request event; a host outside the
 * allowlist, under network.approval risk/always, asked of a person after the call that
 * tried it (approval.requested with tool "network", its preview naming the host, the call
 * and its command); the answer told to the model and kept for the rest of the run.
 * Credentials (network.credentials) are resolved here from the worker's secret providers,
 * added to the run's secrets (masked everywhere), and handed to the proxy only; their
 * hosts are reached through the run's CA, installed in the sandbox's /tmp/.agentd.
 *
 * Must never: let a call run before the proxy listens, put a credential value in the
 * sandbox, an event or a log line, or ask a person about a host nobody tried.
 */

import { create } from "@bufbuild/protobuf";
import { parseHostRule } from "../egress/destination.ts";
import type { RunCa } from "../egress/run-ca.ts";
import { type HostAsk, hostKey, startRunEgress } from "../egress/run-egress.ts";
import type { EngineToolCall } from "../engine/port.ts";
import { AgentdError } from "../errors.ts";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  type Event,
  NetworkRequestSchema,
  OutputMessageSchema,
  PreviewSchema,
  RunPausedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { approvalTicket } from "../kernel/approval-ticket.ts";
import type { KernelRun } from "../kernel/kernel.ts";
import { presetHosts } from "../kernel/network-presets.ts";
import type { NetworkPolicy } from "../kernel/network-schema.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { lookupSecret } from "../kernel/run-secrets.ts";
import { PLACEHOLDER_PATTERN } from "../kernel/secrets.ts";
import { argvLine } from "../tools/run-command.ts";
import type { Drive } from "./drive.ts";
import { egressShadow } from "./egress-shadow.ts";
import type { Next } from "./run-driver.ts";

/** The tool name of a network approval (its call is the one whose process asked). */
export const NETWORK_TOOL = "network";
/** Where the run's CA goes in the sandbox, and the variables that point at it. */
export const CA_DIR = "/tmp/.agentd";
export const CA_ENV: Record<string, string> = {
  SSL_CERT_FILE: `${CA_DIR}/bundle.pem`,
  REQUESTS_CA_BUNDLE: `${CA_DIR}/bundle.pem`,
  CURL_CA_BUNDLE: `${CA_DIR}/bundle.pem`,
  PIP_CERT: `${CA_DIR}/bundle.pem`,
  GIT_SSL_CAINFO: `${CA_DIR}/bundle.pem`,
  NODE_EXTRA_CA_CERTS: `${CA_DIR}/ca.pem`,
};

/**
 * The policy's network section, with the hosts of its registry presets
 * (kernel/network-presets.ts) and the deprecated sandbox.allowlist entries added.
 */
export function networkOf(p: Policy): NetworkPolicy {
  const presets = presetHosts(p.network.presets);
  if (p.sandbox.allowlist.length === 0 && presets.length === 0) return p.network;
  return { ...p.network, allow: [...p.network.allow, ...presets, ...p.sandbox.allowlist] };
}

/** The network.request appends of each drive still in flight. */
const inFlight = new WeakMap<Drive, Set<Promise<unknown>>>();

export function track(d: Drive, p: Promise<unknown>): void {
  const set = inFlight.get(d) ?? new Set();
  inFlight.set(d, set);
  set.add(p);
  void p.finally(() => set.delete(p));
}

/**
 * Before the run's last event: the proxy closes (every connection ends, each recorded) and
 * every network.request still being appended lands first, so the log holds each of them
 * (a record appended after run.completed would be refused and lost).
 */
export async function settleEgress(d: Drive): Promise<void> {
  await d.egress?.close();
  await Promise.all([...(inFlight.get(d) ?? [])]);
}

/** Starts the drive's egress when its sandbox has an egress network. */
export async function openEgress(d: Drive): Promise<void> {
  const at = d.box?.egress;
  if (at === undefined) return;
  const policy = d.deps.policy();
  const credentials = await resolveCredentials(d, networkOf(policy));
  // Loaded only for runs with credentials: the X.509 library is large, and most runs and
  // every process start (a worker that fails to start included) need none of it.
  const ca =
    credentials.size > 0
      ? await (await import("../egress/run-ca.ts")).createRunCa({ runId: d.runId })
      : undefined;
  if (ca !== undefined) await installCa(d, ca);
  const decided = networkDecisions(d.events);
  const trust = await d.deps.trustCounters?.(d.runId).catch(() => undefined);
  const limits = policy.network.limits;
  const o = d.deps.egress ?? {};
  const shadow = egressShadow(d);
  d.egress = await startRunEgress({
    listen: at,
    network: () => networkOf(d.deps.policy()),
    approved: decided.filter((x) => x.approved).map((x) => x.key),
    denied: decided.filter((x) => !x.approved).map((x) => x.key),
    limits: {
      concurrent: limits.concurrent,
      connections: limits.connections,
      bytesPerConnection: limits.connectionBytes,
      bytes: limits.bytes,
    },
    credentials,
    ...(ca === undefined ? {} : { ca }),
    ...(trust === undefined ? {} : { trust }),
    ...(shadow === undefined ? {} : { shadow }),
    ...o,
    record: (r) => {
      const value = create(NetworkRequestSchema, {
        host: r.host,
        port: r.port,
        method: r.method,
        decision: r.decision,
        reason: r.reason,
        bytesUp: BigInt(r.bytesUp),
        bytesDown: BigInt(r.bytesDown),
        durationMs: BigInt(r.durationMs),
        tls: r.tls,
        callId: r.callId,
      });
      const appended = d.writer.append({ case: "networkRequest", value }).catch((err) => {
        d.deps.logger?.warn({ runId: d.runId, err }, "network.request not recorded");
      });
      track(d, appended);
    },
  });
}

/**
 * Credential headers per host, values resolved now from the worker's providers and added
 * to the run's secrets. A name no provider has stops the run: the header could not be
 * added, and the run would reach the host without what the policy promised.
 */
async function resolveCredentials(
  d: Drive,
  n: NetworkPolicy,
): Promise<Map<string, Record<string, string>>> {
  const out = new Map<string, Record<string, string>>();
  for (const c of n.credentials) {
    const names = [...c.value.matchAll(PLACEHOLDER_PATTERN)].map((m) => m[1] as string);
    let value = c.value;
    for (const name of names) {
      const v = await lookupSecret(d.deps.secretProviders ?? [], name);
      if (v === undefined)
        throw new AgentdError(
          "ESECRET_NOT_FOUND",
          `network.credentials for ${c.host} names $ENV.${name}, which no secret provider of worker ${d.deps.workerId} has`,
        );
      d.writer.secrets.add([v]);
      value = value.replaceAll(`$ENV.${name}`, v);
    }
    d.writer.secrets.add([value]);
    // host, or host:port when the policy names one: the header goes to that port only.
    const rule = parseHostRule(c.host);
    if ("error" in rule) continue; // the schema refused it already
    const key = rule.port === undefined ? rule.host : hostKey(rule.host, rule.port);
    out.set(key, { ...out.get(key), [c.header]: value });
  }
  return out;
}

/** The run's CA in the sandbox: alone (Node) and after the image's own roots (the rest). */
async function installCa(d: Drive, ca: RunCa): Promise<void> {
  const script = `umask 022; mkdir -p ${CA_DIR} && cat > ${CA_DIR}/ca.pem && { cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; cat ${CA_DIR}/ca.pem; } > ${CA_DIR}/bundle.pem`;
  const r = await d.box?.exec({
    argv: ["sh", "-c", script],
    stdin: new TextEncoder().encode(ca.certPem),
    // agentd's own step: busybox's sh, mkdir and cat where the agent was injected.
    ...(d.box?.toolEnv === undefined ? {} : { env: { ...d.box.toolEnv } }),
    timeoutMs: 10_000,
    maxOutputBytes: 4096,
  });
  if (r !== undefined && r.exitCode !== 0)
    throw new AgentdError("EIO", `cannot install the run's CA in the sandbox: ${r.stderr.trim()}`);
}

/** Network approvals resolved in the log: host:port, yes or no, and the approval's id. */
export function networkDecisions(
  events: readonly Event[],
): { key: string; approved: boolean; approvalId: string; reason: string; seq: number }[] {
  const asked = new Map<string, string>();
  const out: ReturnType<typeof networkDecisions> = [];
  for (const e of events) {
    const p = e.payload;
    if (p.case === "approvalRequested" && p.value.tool === NETWORK_TOOL)
      asked.set(
        p.value.approvalId,
        hostKey(p.value.preview?.host ?? "", p.value.preview?.port ?? 0),
      );
    else if (p.case === "approvalResolved" && asked.has(p.value.approvalId))
      out.push({
        key: asked.get(p.value.approvalId) as string,
        approved: p.value.decision === ApprovalDecision.APPROVE,
        approvalId: p.value.approvalId,
        reason: p.value.reason,
        seq: Number(e.seq),
      });
  }
  return out;
}

/**
 * After a call: the first host it asked a person for, as approval.requested + run.paused
 * in one commit ("hold"). Other hosts it tried are asked again when the model retries.
 */
/**
 * The kernel's answer to `call`, the run's egress proxy told meanwhile whose connections it
 * sees (network.request names the call).
 */
export async function handleAttributed(
  d: Drive,
  call: EngineToolCall,
): Promise<Awaited<ReturnType<Drive["deps"]["kernel"]["handle"]>>> {
  d.egress?.setCall({ callId: call.callId, tool: call.tool });
  try {
    return await d.deps.kernel.handle(d.kernelRun as KernelRun, call);
  } finally {
    d.egress?.setCall(undefined);
  }
}

export async function askForHosts(
  d: Drive,
  call: { callId: string; tool: string; input: unknown },
): Promise<Next | undefined> {
  const ask = d.egress?.takeAsks()[0];
  if (ask === undefined) return undefined;
  const now = d.deps.now ?? Date.now;
  const ticket = approvalTicket(d.runId, now(), d.deps.policy().approvals.expireAfter);
  const { approvalId } = ticket;
  await Promise.all([
    d.writer.append({
      case: "approvalRequested",
      value: create(ApprovalRequestedSchema, {
        ...ticket,
        callId: ask.callId || call.callId,
        tool: NETWORK_TOOL,
        preview: previewOf(d, ask, call),
      }),
    }),
    d.writer.append({
      case: "runPaused",
      value: create(RunPausedSchema, { reason: "approval", approvalId }),
    }),
  ]);
  return { to: "hold" };
}

function previewOf(d: Drive, ask: HostAsk, call: { callId: string; tool: string; input: unknown }) {
  const input = (call.input ?? {}) as { command?: unknown; argv?: unknown; cwd?: unknown };
  const argv =
    Array.isArray(input.argv) && input.argv.every((a) => typeof a === "string")
      ? (input.argv as string[])
      : undefined;
  const command =
    typeof input.command === "string" ? input.command : argv === undefined ? "" : argvLine(argv);
  const rule = `network.approval: ${d.deps.policy().network.approval}`;
  return create(PreviewSchema, {
    summary: `connect to ${ask.host}:${ask.port} (not in network.allow), asked by ${call.tool} call ${ask.callId || call.callId}${command ? `: ${command}` : ""}`,
    argv: argv ?? (command ? ["sh", "-c", command] : []),
    cwd: typeof input.cwd === "string" ? input.cwd : "",
    matchedRules: [rule],
    host: ask.host,
    port: ask.port,
  });
}

/**
 * Tells the model what a person decided about a host (once per approval, as an agentd
 * notice), and keeps the answer for the rest of this drive's connections.
 */
export async function noteNetworkDecisions(d: Drive): Promise<void> {
  // Only a run with egress has network approvals: no scan of its log on every step otherwise.
  if (d.egress === undefined) return;
  const told = new Set<string>();
  for (const e of d.events) {
    const p = e.payload;
    if (p.case === "outputMessage" && p.value.role === "system") {
      const m = /\(approval (apr_[A-Za-z0-9_]+)\)/.exec(p.value.text);
      if (m !== null) told.add(m[1] as string);
    }
  }
  let wrote = false;
  for (const x of networkDecisions(d.events)) {
    if (x.approved) d.egress?.approve(x.key);
    else d.egress?.deny(x.key);
    if (told.has(x.approvalId)) continue;
    const text = x.approved
      ? `A person approved network access to ${x.key} for the rest of this run (approval ${x.approvalId}); the call that was refused can be tried again.`
      : `A person denied network access to ${x.key} for this run (approval ${x.approvalId})${x.reason ? `: ${x.reason}` : ""}; do not try it again.`;
    await d.writer.append({
      case: "outputMessage",
      value: create(OutputMessageSchema, { role: "system", text }),
    });
    wrote = true;
  }
  if (wrote) await d.refresh();
}

/** The egress options a test or the composition root may set (name resolution, trust). */
export interface DriveEgressOptions {
  resolve?: (host: string) => Promise<string[]>;
  upstreamCa?: string | string[];
  idleTimeoutMs?: number;
  connectTimeoutMs?: number;
}
