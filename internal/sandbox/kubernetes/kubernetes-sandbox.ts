/**
 * The `kubernetes` sandbox driver: one Pod per run in a sandbox namespace, created by the
 * worker through the API server (with a ServiceAccount whose Role is limited to that
 * namespace: pods create/get/list/watch/delete and pods/exec), behind the same port as the
 * Docker driver (port.ts). The Pod's shape is pod-manifest.ts; its handle pod-handle.ts.
 *
 * Must never: touch a Pod without this deployment's managed label, hand out a Pod whose
 * workspace is not complete (the fill mark), or wait for a Pod past its start timeout.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { AgentdError, type ErrorCode } from "../../errors.ts";
import { maxExportBytes, workspaceMount, workspaceOf } from "../docker-sandbox.ts";
import { isFilled, MARK_ROOT, markFilled } from "../fill-mark.ts";
import type { PooledSandbox, ReapOptions, SandboxHandle, SandboxSpec } from "../port.ts";
import { PodHandle, type PodRef, podAgent } from "./pod-handle.ts";
import { ensureIsolation } from "./pod-isolation.ts";
import {
  ANNOTATION_RUN,
  CONTAINER,
  DEFAULT_AGENT_PATH,
  LABEL_MANAGED,
  LABEL_RUN,
  type PodOptions,
  podName,
  runLabel,
  sandboxPod,
} from "./pod-manifest.ts";
import { waitRunning } from "./pod-wait.ts";

export interface KubernetesSandboxOptions {
  kc: KubeConfig;
  /** The sandbox namespace (AGENTD_K8S_NAMESPACE); default "agentd-sandboxes". */
  namespace?: string;
  /** This deployment's key on its Pods (as the Docker driver's managed label). */
  managed?: string;
  /** The agent's path in the sandbox images; default DEFAULT_AGENT_PATH. */
  agentPath?: string;
  runtimeClassName?: string;
  imagePullPolicy?: PodOptions["imagePullPolicy"];
  /** How long a Pod may take to run (scheduling, image pull); default 120 s. */
  startTimeoutMs?: number;
  labels?: Record<string, string>;
}

export function createKubernetesSandbox(o: KubernetesSandboxOptions): PooledSandbox {
  const core = o.kc.makeApiClient(CoreV1Api);
  const namespace = o.namespace ?? "agentd-sandboxes";
  const managed = o.managed ?? "agentd";
  const agentPath = o.agentPath ?? DEFAULT_AGENT_PATH;
  const podOpts: PodOptions = {
    namespace,
    managed,
    agentPath,
    ...(o.runtimeClassName === undefined ? {} : { runtimeClassName: o.runtimeClassName }),
    ...(o.imagePullPolicy === undefined ? {} : { imagePullPolicy: o.imagePullPolicy }),
    ...(o.labels === undefined ? {} : { labels: o.labels }),
  };
  const handleOpts = (exportBytes: number, baseTar?: Uint8Array) => ({
    kc: o.kc,
    core,
    agentPath,
    maxExportBytes: exportBytes,
    ...(baseTar === undefined ? {} : { baseTar }),
  });
  const refOf = (pod: V1Pod): PodRef => ({
    namespace,
    name: pod.metadata?.name ?? "",
    uid: pod.metadata?.uid ?? "",
  });
  const remove = (name: string) =>
    core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch(() => undefined);

  /** The namespace's isolation, once per process (retried after a failure). */
  let isolated: Promise<void> | undefined;
  const isolation = (): Promise<void> => {
    isolated ??= ensureIsolation(o.kc, namespace).catch((err: unknown) => {
      isolated = undefined;
      throw err;
    });
    return isolated;
  };

  async function createPod(spec: SandboxSpec): Promise<V1Pod> {
    await isolation();
    const name = podName(managed, spec.runId);
    const body = sandboxPod(spec, { name, runId: spec.runId, tenantId: spec.tenantId }, podOpts);
    try {
      return await core.createNamespacedPod({ namespace, body });
    } catch (err) {
      throw apiError(err, `create the sandbox Pod of run ${spec.runId}`);
    }
  }

  return {
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      if (spec.network === "egress")
        throw new AgentdError("EUNIMPLEMENTED", "network egress: not yet on the kubernetes driver");
      const { source, baseTar } = await workspaceOf(spec);
      const ws = workspaceMount(spec);
      const created = await createPod(spec);
      const ref = refOf(created);
      try {
        await waitRunning(o.kc, namespace, ref.name, CONTAINER, o.startTimeoutMs ?? 120_000);
        const agent = await podAgent({ kc: o.kc, agentPath }, ref);
        await agent.unpack(source);
        const h = new PodHandle(
          ref,
          spec.runId,
          handleOpts(maxExportBytes(ws.size, ws.inodes), baseTar),
          agent,
        );
        await markFilled(h);
        return h;
      } catch (err) {
        await remove(ref.name);
        throw err instanceof AgentdError
          ? err
          : apiError(err, `start the sandbox of run ${spec.runId}`);
      }
    },

    async find(runId: string): Promise<SandboxHandle | undefined> {
      let pod: V1Pod;
      try {
        pod = await core.readNamespacedPod({ namespace, name: podName(managed, runId) });
      } catch (err) {
        if ((err as { code?: number }).code === 404) return undefined;
        throw apiError(err, `find the sandbox of run ${runId}`);
      }
      const meta = pod.metadata;
      if (meta?.labels?.[LABEL_MANAGED] !== managed || meta.annotations?.[ANNOTATION_RUN] !== runId)
        return undefined;
      const ws = workspaceMount({ ...specOfPod(pod), limits: limitsOfPod(pod) });
      const h = new PodHandle(refOf(pod), runId, handleOpts(maxExportBytes(ws.size, ws.inodes)));
      if ((await h.lost()) || !(await isFilled(h, MARK_ROOT))) {
        await h.destroy().catch(() => undefined);
        return undefined;
      }
      return h;
    },

    // Warm Pods: not yet (every run's Pod starts cold).
    prewarm: async () => undefined,
    close: async () => undefined,

    async reap(
      isLive: (runId: string) => Promise<boolean> | boolean,
      _opts?: ReapOptions,
    ): Promise<string[]> {
      const list = await core.listNamespacedPod({
        namespace,
        labelSelector: `${LABEL_MANAGED}=${managed}`,
      });
      const reaped: string[] = [];
      for (const pod of list.items) {
        const runId = pod.metadata?.annotations?.[ANNOTATION_RUN];
        if (runId === undefined || pod.metadata?.labels?.[LABEL_RUN] !== runLabel(runId)) continue;
        if (await isLive(runId)) continue;
        await remove(pod.metadata?.name ?? "");
        reaped.push(runId);
      }
      return reaped;
    },
  };
}

/** What find() needs of a Pod's shape: its workspace size (the emptyDir's limit). */
function specOfPod(pod: V1Pod): { image: string; network: "none" } {
  return { image: pod.spec?.containers[0]?.image ?? "", network: "none" };
}

function limitsOfPod(pod: V1Pod) {
  const ws = pod.spec?.volumes?.find((v) => v.name === "workspace")?.emptyDir?.sizeLimit;
  return {
    memoryBytes: 0,
    cpus: 0,
    pids: 0,
    tmpBytes: 0,
    workspaceBytes: Number(ws ?? 0) || undefined,
  };
}

/** An API server's refusal as a typed error (403: the worker's Role; 404 namespace). */
export function apiError(err: unknown, doing: string): AgentdError {
  const e = err as { code?: number; body?: unknown; message?: string };
  let reason = e.message ?? String(err);
  try {
    const body = typeof e.body === "string" ? JSON.parse(e.body) : e.body;
    if (body && typeof body === "object" && "message" in body) reason = String(body.message);
  } catch {
    // not a Status: the message says enough
  }
  const code: ErrorCode =
    e.code === 403 || e.code === 401 ? "EPERMISSION" : e.code === 409 ? "EEXISTS" : "EUNAVAILABLE";
  return new AgentdError(code, `cannot ${doing}: ${reason}`);
}
