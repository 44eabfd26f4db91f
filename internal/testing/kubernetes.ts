/**
 * A real Kubernetes for tests: scripts/kubernetes/cluster.sh brings up the single-node
 * cluster (built from the pinned sources on first use, then cached under .tools/), images
 * are copied from Docker into its containerd, and each test file gets a namespace of its
 * own, deleted at the end. A cluster that cannot come up is a failure, never a skip.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { ulid } from "ulid";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLUSTER = join(root, "scripts", "kubernetes", "cluster.sh");
const run = promisify(execFile);

/** The host as the test cluster's Pods reach it: the Pod bridge's own address (cluster.sh). */
export const HOST_FROM_PODS = "10.244.0.1";
const K8S_VERSION = /^K8S_VERSION=(\S+)/m.exec(
  readFileSync(join(root, "scripts", "kubernetes", "versions.sh"), "utf8"),
)?.[1];
export const HELM = join(root, ".tools", "kubernetes", String(K8S_VERSION), "bin", "helm");

/** Brings the cluster up (idempotent) and returns its administrator's kubeconfig path. */
export async function requireCluster(): Promise<string> {
  try {
    const { stdout } = await run("bash", [CLUSTER, "up"], { maxBuffer: 16 * 1024 * 1024 });
    return stdout.trim().split("\n").at(-1) as string;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`the test cluster did not come up: ${(e.stderr ?? e.message).slice(-3000)}`);
  }
}

/** Copies Docker images into the cluster's containerd (what a registry would serve). */
export async function loadImages(...images: string[]): Promise<void> {
  await run("bash", [CLUSTER, "load", ...images], { maxBuffer: 16 * 1024 * 1024 });
}

export interface TestNamespace {
  kc: KubeConfig;
  core: CoreV1Api;
  namespace: string;
  cleanup(): Promise<void>;
}

/** A namespace of this test file's own, with the Pod Security level given (default baseline). */
export async function testNamespace(level = "baseline"): Promise<TestNamespace> {
  const kc = new KubeConfig();
  kc.loadFromFile(await requireCluster());
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = `test-${ulid().toLowerCase().slice(-12)}`;
  await core.createNamespace({
    body: {
      metadata: {
        name: namespace,
        labels: { "pod-security.kubernetes.io/enforce": level },
      },
    },
  });
  return {
    kc,
    core,
    namespace,
    async cleanup() {
      await core.deleteNamespace({ name: namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
    },
  };
}
