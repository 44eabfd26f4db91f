/**
 * The sandbox namespace's NetworkPolicy: every sandbox Pod (app.kubernetes.io/name:
 * agentd-sandbox) takes no connection and makes none — no other Pod, no Service, no API
 * server, no DNS, no metadata address, nothing outside. Made by the driver before its
 * first Pod when it is missing (the Helm chart installs it too); a driver that can neither
 * see nor make it starts no Pod (a sandbox without it would reach the cluster network).
 *
 * Must never: start a Pod before the policy is known to exist, or loosen a policy an
 * operator changed (an existing one is left as it is).
 */
import { type KubeConfig, NetworkingV1Api, type V1NetworkPolicy } from "@kubernetes/client-node";
import { AgentdError } from "../../errors.ts";

export const ISOLATION_POLICY = "agentd-sandbox-isolation";
export const SANDBOX_SELECTOR = { "app.kubernetes.io/name": "agentd-sandbox" };

export function isolationPolicy(namespace: string): V1NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: ISOLATION_POLICY, namespace },
    spec: {
      podSelector: { matchLabels: SANDBOX_SELECTOR },
      policyTypes: ["Ingress", "Egress"],
      ingress: [],
      egress: [],
    },
  };
}

/** Resolves once the policy exists (made when missing); throws naming what the worker lacks. */
export async function ensureIsolation(kc: KubeConfig, namespace: string): Promise<void> {
  const net = kc.makeApiClient(NetworkingV1Api);
  try {
    await net.readNamespacedNetworkPolicy({ namespace, name: ISOLATION_POLICY });
    return;
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw refused(err, namespace);
  }
  try {
    await net.createNamespacedNetworkPolicy({ namespace, body: isolationPolicy(namespace) });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw refused(err, namespace);
  }
}

function refused(err: unknown, namespace: string): AgentdError {
  const code = (err as { code?: number }).code;
  return new AgentdError(
    code === 403 ? "EPERMISSION" : "EUNAVAILABLE",
    `no sandbox Pod is started without the NetworkPolicy ${namespace}/${ISOLATION_POLICY}, which could not be read or made (${code === 403 ? "the worker's Role must allow get and create on networkpolicies in that namespace" : (err as Error).message})`,
  );
}
