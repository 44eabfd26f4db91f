/**
 * Whether this process can enforce `sandbox.network: allowlist` on its Docker engine. Two
 * things must hold, both about where the process runs, not about the engine's API:
 *
 * - the engine's bridges are in this process's network namespace: the egress proxy
 *   listens on a run network's gateway address and the firewall rules match its bridge,
 *   and both exist only where the engine made them (the engine's host; the pod of a dind
 *   sidecar; not a container that only mounts the host's Docker socket);
 * - iptables works here (installed, with root or CAP_NET_ADMIN): egress-guard.ts.
 *
 * A worker asks once at start (and refuses to start under an allowlist policy when the
 * answer is no); every run network is checked again when it is made (bridgeIsHere).
 *
 * Must never: change anything (it lists networks, reads /sys and lists the firewall).
 */
import { existsSync } from "node:fs";
import type Docker from "dockerode";
import { checkFirewall } from "./egress-guard.ts";

/** Whether the network interface `name` exists in this process's network namespace. */
export function bridgeIsHere(name: string): boolean {
  // /sys/class/net lists the interfaces of the namespace that mounted /sys: a container's
  // own, the host's under network_mode: host, the pod's in Kubernetes.
  return /^(?!\.\.?$)[A-Za-z0-9_.-]{1,15}$/.test(name) && existsSync(`/sys/class/net/${name}`);
}

/** The bridge interface names of the engine's bridge networks (docker0, br-<id>…). */
export async function engineBridges(docker: Docker): Promise<string[]> {
  const nets = await docker.listNetworks({ filters: { driver: ["bridge"] } });
  return nets.map(
    (n) => n.Options?.["com.docker.network.bridge.name"] ?? `br-${String(n.Id).slice(0, 12)}`,
  );
}

/** Why the engine's bridges are not reachable from here, or undefined when one of them is. */
export async function namespaceProblem(docker: Docker): Promise<string | undefined> {
  let bridges: string[];
  try {
    bridges = await engineBridges(docker);
  } catch (err) {
    return `cannot list the Docker engine's networks: ${(err as Error).message}`;
  }
  // An engine without any bridge network gives nothing to compare: each run network is
  // checked when it is made.
  if (bridges.length === 0 || bridges.some(bridgeIsHere)) return undefined;
  const named = bridges.slice(0, 3).join(", ");
  return `the Docker engine's bridges (${named}) are not in this process's network namespace: the worker must run where the engine's networks are (on the engine's host; with Compose, network_mode: host; in Kubernetes, in the pod of its dind sidecar), not in a container that only reaches the engine's API`;
}

/** Why allowlist runs cannot be enforced here, or undefined when they can. */
export async function egressProblem(docker: Docker): Promise<string | undefined> {
  return (await namespaceProblem(docker)) ?? (await checkFirewall());
}
