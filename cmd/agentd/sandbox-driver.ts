/**
 * The worker's sandbox driver (--sandbox-driver): Docker (the engine DOCKER_HOST names) or
 * Kubernetes (one Pod per run in --k8s-namespace, through the API server of the in-cluster
 * ServiceAccount or KUBECONFIG), checked at start so that a worker that cannot make
 * sandboxes stops in one line instead of failing each run it claims.
 *
 * Must never: claim runs with a driver whose engine or API server did not answer.
 */
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { AgentdError } from "../../internal/errors.ts";
import type { Policy } from "../../internal/kernel/policy-schema.ts";
import { connectDocker } from "../../internal/sandbox/docker-connect.ts";
import { createDockerSandbox } from "../../internal/sandbox/docker-sandbox.ts";
import { egressProblem } from "../../internal/sandbox/egress-preflight.ts";
import {
  apiError,
  createKubernetesSandbox,
} from "../../internal/sandbox/kubernetes/kubernetes-sandbox.ts";
import type { PooledSandbox } from "../../internal/sandbox/port.ts";

/** A driver as the worker uses it: the port, warm sandboxes, and whether it answers. */
export interface OpenedSandbox {
  sandbox: PooledSandbox;
  ready(): Promise<boolean>;
  describe: string;
}

export interface DriverConfig {
  "sandbox-driver": "docker" | "kubernetes";
  "k8s-namespace": string;
  "k8s-runtime-class"?: string | undefined;
  "warm-sandboxes": number;
}

export async function openSandboxDriver(
  cfg: DriverConfig,
  o: { workerId: string; policy: () => Policy; logger: Logger },
): Promise<OpenedSandbox> {
  return cfg["sandbox-driver"] === "kubernetes" ? openKubernetes(cfg, o) : openDocker(cfg, o);
}

async function openDocker(
  cfg: DriverConfig,
  o: { workerId: string; policy: () => Policy },
): Promise<OpenedSandbox> {
  // DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH: a remote engine is checked now.
  const engine = await connectDocker(process.env);
  // An allowlist policy this worker cannot enforce (its engine's bridges elsewhere, no
  // iptables or no right to use it) stops it here, in one line, not each run at its start.
  if (o.policy().sandbox.network === "allowlist") {
    const problem = await egressProblem(engine.docker);
    if (problem !== undefined)
      throw new AgentdError(
        "EUNAVAILABLE",
        `the policy says sandbox.network: allowlist, which this worker cannot enforce: ${problem}`,
      );
  }
  const sandbox = createDockerSandbox({
    docker: engine.docker,
    warm: cfg["warm-sandboxes"],
    poolOwner: o.workerId,
    // Images without the agent (a run's own) get the policy image's, injected read-only.
    agentSource: () => o.policy().sandbox.image,
  });
  return { sandbox, ready: () => engine.ready(), describe: engine.describe };
}

async function openKubernetes(
  cfg: DriverConfig,
  o: { workerId: string; policy: () => Policy },
): Promise<OpenedSandbox> {
  if (o.policy().sandbox.network === "allowlist")
    throw new AgentdError(
      "EUNIMPLEMENTED",
      "the policy says sandbox.network: allowlist, which the kubernetes driver does not enforce yet: use --sandbox-driver docker for allowlist runs",
    );
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const namespace = cfg["k8s-namespace"];
  const core = kc.makeApiClient(CoreV1Api);
  const look = () => core.listNamespacedPod({ namespace, limit: 1 });
  await look().catch((err: unknown) => {
    throw apiError(err, `list the Pods of the sandbox namespace ${namespace}`);
  });
  const runtimeClass = cfg["k8s-runtime-class"];
  const sandbox = createKubernetesSandbox({
    kc,
    namespace,
    warm: cfg["warm-sandboxes"],
    poolOwner: o.workerId,
    ...(runtimeClass === undefined ? {} : { runtimeClassName: runtimeClass }),
  });
  return {
    sandbox,
    ready: () =>
      look().then(
        () => true,
        () => false,
      ),
    describe: `${kc.getCurrentCluster()?.server ?? "in-cluster"} namespace ${namespace}`,
  };
}
