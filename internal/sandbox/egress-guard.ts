/**
 * The host firewall of a run's egress network. A Docker `--internal` network has no route
 * out, but its bridge carries the gateway address on the host: a sandbox can still reach
 * every service listening on the host's addresses (the engine's API, Redis, agentd's own
 * ports). These iptables rules, in the engine's network namespace, leave the sandbox one
 * destination — the egress proxy on the gateway — and drop everything else arriving on
 * the bridge (IPv4 and IPv6, to the host and forwarded); and nothing but the run's bridge
 * reaches the proxy's port (not another container, not a host process). Every rule carries the comment
 * `agentd-egress:<bridge>`, so a crashed worker's rules are found and swept.
 *
 * Must never: let a container start on the network before the rules are in place (the
 * caller guards first), or remove a rule that is not agentd's.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { AgentdError } from "../errors.ts";

const run = promisify(execFile);
const TAG = "agentd-egress:";

export interface GuardTarget {
  /** The bridge interface of the run's network (≤ 15 characters). */
  bridge: string;
  /** The gateway address the proxy listens on. */
  gateway: string;
  port: number;
}

type Rule = { cmd: "iptables" | "ip6tables"; chain: "INPUT" | "FORWARD"; spec: string[] };

/** The rules of one bridge, in the order they must be read (the first match wins). */
function rulesOf(t: GuardTarget): Rule[] {
  const tag = ["-m", "comment", "--comment", `${TAG}${t.bridge}`];
  const accept = ["-i", t.bridge, "-p", "tcp", "-d", t.gateway, "--dport", String(t.port)];
  const proxy = ["-d", t.gateway, "-p", "tcp", "--dport", String(t.port)];
  return [
    // The proxy is the run's: nothing from elsewhere (another bridge, the host) reaches it.
    {
      cmd: "iptables",
      chain: "INPUT",
      spec: ["!", "-i", t.bridge, ...proxy, ...tag, "-j", "DROP"],
    },
    { cmd: "iptables", chain: "INPUT", spec: [...accept, ...tag, "-j", "ACCEPT"] },
    { cmd: "iptables", chain: "INPUT", spec: ["-i", t.bridge, ...tag, "-j", "DROP"] },
    { cmd: "iptables", chain: "FORWARD", spec: ["-i", t.bridge, ...tag, "-j", "DROP"] },
    { cmd: "ip6tables", chain: "INPUT", spec: ["-i", t.bridge, ...tag, "-j", "DROP"] },
    { cmd: "ip6tables", chain: "FORWARD", spec: ["-i", t.bridge, ...tag, "-j", "DROP"] },
  ];
}

async function has(r: Rule): Promise<boolean> {
  try {
    await run(r.cmd, ["-w", "5", "-C", r.chain, ...r.spec]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Puts the bridge's rules in place (idempotent: a rule already there is not doubled).
 * Without iptables or the right to use it, nothing may start: EUNAVAILABLE, naming why.
 */
export async function guardBridge(t: GuardTarget): Promise<void> {
  // Inserted at the top in reverse, so they end up in rulesOf's order, above Docker's own.
  for (const r of rulesOf(t).reverse()) {
    if (await has(r)) continue;
    try {
      await run(r.cmd, ["-w", "5", "-I", r.chain, "1", ...r.spec]);
    } catch (err) {
      // A host without IPv6 has no ip6tables tables to guard: nothing arrives over it.
      if (r.cmd === "ip6tables" && !existsSync("/proc/net/if_inet6")) continue;
      throw new AgentdError(
        "EUNAVAILABLE",
        `sandbox.network: allowlist needs ${r.cmd} and the right to change the firewall (root or CAP_NET_ADMIN) in the Docker engine's network namespace: ${firstLine(err)}`,
        { cause: err },
      );
    }
  }
}

/** Why the firewall cannot be set here (iptables missing, no right to use it), or undefined. */
export async function checkFirewall(): Promise<string | undefined> {
  try {
    await run("iptables", ["-w", "5", "-S", "INPUT"]);
    return undefined;
  } catch (err) {
    return `iptables -S INPUT: ${firstLine(err)} (needs iptables and root or CAP_NET_ADMIN in the Docker engine's network namespace; the agentd image's iptables needs the capabilities NET_ADMIN and NET_RAW and no no-new-privileges)`;
  }
}

/** Removes the bridge's rules (those that exist). */
export async function unguardBridge(t: Pick<GuardTarget, "bridge">): Promise<void> {
  for (const cmd of ["iptables", "ip6tables"] as const) {
    for (const line of await listTagged(cmd)) {
      if (line.tag !== `${TAG}${t.bridge}`) continue;
      await run(cmd, ["-w", "5", ...line.args]).catch(() => undefined);
    }
  }
}

/** Removes the rules of bridges that no longer exist (a worker died before its cleanup). */
export async function sweepGuards(): Promise<string[]> {
  const swept = new Set<string>();
  for (const cmd of ["iptables", "ip6tables"] as const) {
    for (const line of await listTagged(cmd)) {
      const bridge = line.tag.slice(TAG.length);
      if (existsSync(`/sys/class/net/${bridge}`)) continue;
      await run(cmd, ["-w", "5", ...line.args]).catch(() => undefined);
      swept.add(bridge);
    }
  }
  return [...swept];
}

/** agentd's rules as `-D CHAIN spec…` argument lists, with their tags. */
async function listTagged(cmd: string): Promise<{ tag: string; args: string[] }[]> {
  let out: string;
  try {
    out = (await run(cmd, ["-w", "5", "-S"])).stdout;
  } catch {
    return [];
  }
  const found: { tag: string; args: string[] }[] = [];
  for (const line of out.split("\n")) {
    const m = /^-A (\S+) (.*--comment "?(agentd-egress:[A-Za-z0-9]+)"?.*)$/.exec(line);
    if (m === null) continue;
    const args = (m[2] as string).split(" ").map((a) => a.replace(/^"|"$/g, ""));
    found.push({ tag: m[3] as string, args: ["-D", m[1] as string, ...args] });
  }
  return found;
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string; code?: string };
  if (e.code === "ENOENT") return "the command is not installed";
  return (e.stderr || e.message || String(err)).split("\n")[0]?.trim() ?? "";
}
