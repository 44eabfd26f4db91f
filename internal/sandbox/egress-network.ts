/**
 * A run's own egress network on the Docker engine (policy sandbox.network: allowlist): an
 * `--internal` bridge (no route out, one per run so runs cannot reach each other) whose
 * only other member is the host side, where agentd's egress proxy listens on the gateway
 * address. The host firewall (egress-guard.ts) is in place before the network is handed
 * out. The sandbox gets the proxy in the usual variables (HTTP_PROXY, HTTPS_PROXY,
 * NO_PROXY, lower case too).
 *
 * Must never: hand out a network whose firewall is not in place, or remove a network
 * that is not agentd's (labels and names decide).
 */
import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { dockerError } from "./docker-handle.ts";
import { guardBridge, unguardBridge } from "./egress-guard.ts";
import { bridgeIsHere } from "./egress-preflight.ts";

/** The port the egress proxy listens on, on each run network's gateway address. */
export const EGRESS_PORT = 3128;
export const LABEL_EGRESS_RUN = "agentd.egress-run";

export interface EgressNetwork {
  name: string;
  bridge: string;
  gateway: string;
}

/** The bridge interface of a network: 15 characters at most (Linux's IFNAMSIZ). */
export function bridgeName(network: string): string {
  return `agd${createHash("sha256").update(network).digest("hex").slice(0, 12)}`;
}

/** The proxy variables every process of the sandbox gets. */
export function proxyEnv(gateway: string): Record<string, string> {
  const url = `http://${gateway}:${EGRESS_PORT}`;
  const local = "localhost,127.0.0.1,::1";
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    NO_PROXY: local,
    no_proxy: local,
    // Node.js ≥ 24.5: fetch and http(s) use the variables above.
    NODE_USE_ENV_PROXY: "1",
    // npm (and pnpm, yarn classic) by their own config names, whatever their version reads.
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    npm_config_noproxy: local,
    // Cargo reads http.proxy (this variable) before the generic ones.
    CARGO_HTTP_PROXY: url,
    // The JVM (Maven, Gradle, their daemons and tests) reads none of the variables above:
    // its proxy is a system property. JAVA_TOOL_OPTIONS reaches every JVM the sandbox
    // starts (MAVEN_OPTS stays free for the cache's local repository, cache-env.ts).
    JAVA_TOOL_OPTIONS: [
      `-Dhttp.proxyHost=${gateway}`,
      `-Dhttp.proxyPort=${EGRESS_PORT}`,
      `-Dhttps.proxyHost=${gateway}`,
      `-Dhttps.proxyPort=${EGRESS_PORT}`,
      "-Dhttp.nonProxyHosts=localhost|127.0.0.1",
    ].join(" "),
  };
}

/** Creates (or finds, after a crash between steps) the run's network and guards it. */
export async function openEgressNetwork(
  docker: Docker,
  name: string,
  labels: Record<string, string>,
): Promise<EgressNetwork> {
  const bridge = bridgeName(name);
  try {
    await docker.createNetwork({
      Name: name,
      Driver: "bridge",
      Internal: true,
      CheckDuplicate: true,
      EnableIPv6: false,
      Labels: labels,
      Options: {
        "com.docker.network.bridge.name": bridge,
        "com.docker.network.bridge.enable_icc": "false",
      },
    });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 409)
      throw dockerError(err, `create the egress network ${name}`);
  }
  const net = await inspectEgressNetwork(docker, name);
  if (net === undefined) throw dockerError(new Error("gone after create"), `open ${name}`);
  try {
    // Rules for a bridge that is not here would guard nothing, and the proxy could not
    // listen on its gateway: a worker outside the engine's network namespace stops here.
    if (!bridgeIsHere(net.bridge))
      throw new AgentdError(
        "EUNAVAILABLE",
        `sandbox.network: allowlist needs the worker in the Docker engine's network namespace: the run network's bridge ${net.bridge} is not here (with Compose, network_mode: host; in Kubernetes, the pod of the dind sidecar)`,
      );
    await guardBridge({ bridge: net.bridge, gateway: net.gateway, port: EGRESS_PORT });
  } catch (err) {
    await removeEgressNetwork(docker, name);
    throw err;
  }
  return net;
}

/** The network's bridge and gateway; undefined when it does not exist. */
export async function inspectEgressNetwork(
  docker: Docker,
  name: string,
): Promise<EgressNetwork | undefined> {
  let info: { Options?: Record<string, string>; IPAM?: { Config?: { Gateway?: string }[] } };
  try {
    info = await docker.getNetwork(name).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw dockerError(err, `inspect the egress network ${name}`);
  }
  const gateway = info.IPAM?.Config?.find((c) => c.Gateway)?.Gateway;
  const bridge = info.Options?.["com.docker.network.bridge.name"];
  if (gateway === undefined || bridge === undefined)
    throw dockerError(new Error("no gateway or bridge"), `use the egress network ${name}`);
  return { name, bridge, gateway };
}

/** Removes the network and its firewall rules (idempotent). */
export async function removeEgressNetwork(docker: Docker, name: string): Promise<void> {
  await docker
    .getNetwork(name)
    .remove()
    .catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw dockerError(err, `remove the egress network ${name}`);
    });
  await unguardBridge({ bridge: bridgeName(name) });
}
