/**
 * The Pod of one run's sandbox: the same shape as the Docker container (docker-sandbox.ts)
 * in Kubernetes' terms. The agent is the main process, root with only SETUID, SETGID and
 * CHOWN (it drops every call to uid 1000); no service-account token; read-only root;
 * seccomp RuntimeDefault; no privilege escalation; /workspace, /tmp and /cache are
 * memory-backed emptyDirs with size limits (charged to the Pod's memory like Docker's
 * tmpfs); the process namespace is shared so the pause process is PID 1 and reaps what
 * calls orphan; never restarted (a restart would come back with an empty workspace).
 *
 * Must never: mount a host path, a service-account token or anything writable but the
 * three emptyDirs; ask for a capability beyond the agent's; name the tenant in a label
 * (label values are restricted; a tenant id is kept in an annotation).
 */
import type { V1Pod } from "@kubernetes/client-node";
import { CACHE_DIR } from "../cache-env.ts";
import { DEFAULT_WORKSPACE_BYTES } from "../docker-sandbox.ts";
import type { SandboxShape } from "../port.ts";
import { WORKSPACE } from "../port.ts";
import { SANDBOX_SELECTOR } from "./pod-isolation.ts";

export const LABEL_RUN = "agentd.dev/run-id";
export const LABEL_MANAGED = "agentd.dev/managed";
export const LABEL_POOL = "agentd.dev/pool";
export const ANNOTATION_TENANT = "agentd.dev/tenant";
export const ANNOTATION_RUN = "agentd.dev/run-id";
/** A warm Pod's keeper (the worker id, host:pid): its Pods go when it is known dead. */
export const ANNOTATION_POOL_OWNER = "agentd.dev/pool-owner";
/** The agent in agentd's sandbox images (scripts/build-images.sh's label). */
export const DEFAULT_AGENT_PATH = "/usr/local/libexec/agentd-agent";
export const CONTAINER = "sandbox";

export interface PodOptions {
  namespace: string;
  /** The deployment's key: Pods of another key are never touched. */
  managed: string;
  agentPath: string;
  runtimeClassName?: string;
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /** Labels of the Pod beside agentd's own (a NetworkPolicy selects sandboxes by them). */
  labels?: Record<string, string>;
}

/** A Pod name for a run: DNS-1123, lower case (run ids are ULIDs, upper case). */
export function podName(managed: string, runId: string): string {
  return `agentd-${managed}-${runId}`
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 63);
}

/** A label-safe run id (ULIDs are; anything else is folded to the allowed characters). */
export function runLabel(runId: string): string {
  return runId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 63);
}

/** Cores as millicores (at least 10m): the API server refuses finer quantities. */
function cpuQuantity(cores: number): string {
  return `${Math.max(10, Math.round(cores * 1000))}m`;
}

function emptyDir(name: string, bytes: number) {
  return { name, emptyDir: { medium: "Memory", sizeLimit: `${Math.floor(bytes)}` } };
}

/** The Pod of `shape`, for run `runId` of `tenantId` (or a warm Pod: runId "", pool id). */
export function sandboxPod(
  shape: SandboxShape,
  ids: { name: string; runId: string; tenantId: string; poolOwner?: string },
  o: PodOptions,
): V1Pod {
  const ws = Math.floor(shape.limits.workspaceBytes ?? DEFAULT_WORKSPACE_BYTES);
  const tmp = Math.floor(shape.limits.tmpBytes);
  const cache = Math.floor(shape.limits.cacheBytes ?? 0);
  const memory = Math.floor(shape.limits.memoryBytes) + ws + tmp + cache;
  const env = { HOME: "/tmp", ...shape.env };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: ids.name,
      namespace: o.namespace,
      labels: {
        ...o.labels,
        ...SANDBOX_SELECTOR,
        [LABEL_MANAGED]: o.managed,
        ...(ids.runId === "" ? {} : { [LABEL_RUN]: runLabel(ids.runId) }),
        ...(ids.poolOwner === undefined ? {} : { [LABEL_POOL]: "warm" }),
      },
      annotations: {
        ...(ids.runId === "" ? {} : { [ANNOTATION_RUN]: ids.runId }),
        ...(ids.tenantId === "" ? {} : { [ANNOTATION_TENANT]: ids.tenantId }),
        ...(ids.poolOwner === undefined ? {} : { [ANNOTATION_POOL_OWNER]: ids.poolOwner }),
      },
    },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      shareProcessNamespace: true,
      terminationGracePeriodSeconds: 1,
      ...(o.runtimeClassName === undefined ? {} : { runtimeClassName: o.runtimeClassName }),
      // network "none": no DNS either (the Pod's network itself is cut by NetworkPolicy).
      ...(shape.network === "none"
        ? { dnsPolicy: "None", dnsConfig: { nameservers: ["127.0.0.1"] } }
        : {}),
      securityContext: { seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        {
          name: CONTAINER,
          image: shape.image,
          imagePullPolicy: o.imagePullPolicy ?? "IfNotPresent",
          command: [o.agentPath],
          args: [],
          workingDir: WORKSPACE,
          env: Object.entries(env).map(([name, value]) => ({ name, value })),
          stdin: false,
          securityContext: {
            runAsUser: 0,
            runAsGroup: 0,
            runAsNonRoot: false,
            privileged: false,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ["ALL"], add: ["SETUID", "SETGID", "CHOWN"] },
          },
          // Memory is requested whole (the emptyDirs live in it: an overcommitted node
          // would OOM a run's workspace); CPU a tenth of the limit, so that a node holds
          // runs that mostly wait for their model rather than refusing them.
          resources: {
            requests: { cpu: cpuQuantity(shape.limits.cpus / 10), memory: `${memory}` },
            limits: { cpu: cpuQuantity(shape.limits.cpus), memory: `${memory}` },
          },
          volumeMounts: [
            { name: "workspace", mountPath: WORKSPACE },
            { name: "tmp", mountPath: "/tmp" },
            ...(cache > 0 ? [{ name: "cache", mountPath: CACHE_DIR }] : []),
          ],
        },
      ],
      volumes: [
        emptyDir("workspace", ws),
        emptyDir("tmp", tmp),
        ...(cache > 0 ? [emptyDir("cache", cache)] : []),
      ],
    },
  };
}
