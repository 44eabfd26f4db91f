/**
 * The `kubernetes` sandbox driver: one Pod per run in a sandbox namespace, created by the
 * worker through the API server (with a ServiceAccount whose Role is limited to that
 * namespace: pods create/get/list/watch/delete and pods/exec), behind the same port as the
 * Docker driver (port.ts). The Pod's shape is pod-manifest.ts; its handle pod-handle.ts.
 *
 * Must never: touch a Pod without this deployment's managed label, hand out a Pod whose
 * workspace is not complete (the fill mark), or wait for a Pod past its start timeout.
 */
import { randomUUID } from "node:crypto";
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { AgentdError, type ErrorCode } from "../../errors.ts";
import { metrics } from "../../telemetry/metrics.ts";
import type { AgentChannel } from "../agent-channel.ts";
import { maxExportBytes, workspaceMount, workspaceOf } from "../docker-sandbox.ts";
import { isFilled, MARK_ROOT, markFilled } from "../fill-mark.ts";
import type { PooledSandbox, SandboxHandle, SandboxShape, SandboxSpec } from "../port.ts";
import { createWarmPool } from "../warm-pool.ts";
import { claimPod, podOfRun } from "./pod-claim.ts";
import { PodHandle, type PodRef } from "./pod-handle.ts";
import { ensureIsolation } from "./pod-isolation.ts";
import { DEFAULT_AGENT_PATH, type PodOptions, podName, sandboxPod } from "./pod-manifest.ts";
import { reapPods } from "./pod-reap.ts";
import { agentWhenUp } from "./pod-start.ts";

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
  /** Warm Pods kept ready per shape (--warm-sandboxes); 0: every run's Pod starts cold. */
  warm?: number;
  /** The keeper of this instance's warm Pods (the worker id); reaped when it is dead. */
  poolOwner?: string;
  now?: () => number;
}

export function createKubernetesSandbox(o: KubernetesSandboxOptions): PooledSandbox {
  const core = o.kc.makeApiClient(CoreV1Api);
  const namespace = o.namespace ?? "agentd-sandboxes";
  const managed = o.managed ?? "agentd";
  const agentPath = o.agentPath ?? DEFAULT_AGENT_PATH;
  const poolOwner = o.poolOwner ?? randomUUID();
  const now = o.now ?? Date.now;
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
    id: pod.metadata?.uid ?? "",
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

  /** Creates a Pod of `shape` (a run's when `runId` is set, else a warm one) and waits for it to run. */
  async function startPod(
    shape: SandboxShape,
    ids: { runId: string; tenantId: string },
  ): Promise<AgentChannel<PodRef>> {
    await isolation();
    const name = ids.runId === "" ? warmName(managed) : podName(managed, ids.runId);
    const warm = ids.runId === "" ? { poolOwner } : {};
    const body = sandboxPod(shape, { name, ...ids, ...warm }, podOpts);
    let ref: PodRef;
    try {
      ref = refOf(await core.createNamespacedPod({ namespace, body }));
    } catch (err) {
      throw apiError(err, `create a sandbox Pod${ids.runId === "" ? "" : ` for run ${ids.runId}`}`);
    }
    try {
      const timeoutMs = o.startTimeoutMs ?? 120_000;
      return await agentWhenUp({ kc: o.kc, agentPath, timeoutMs }, ref, () => remove(ref.name));
    } catch (err) {
      await remove(ref.name);
      throw err instanceof AgentdError ? err : apiError(err, `start the sandbox Pod ${ref.name}`);
    }
  }

  const pool = createWarmPool<AgentChannel<PodRef>>({
    target: o.warm ?? 0,
    make: (shape) => startPod(shape, { runId: "", tenantId: "" }),
    now,
  });

  /** The workspace into `agent`'s Pod, then the fill mark: a handle for the run. */
  async function fill(agent: AgentChannel<PodRef>, spec: SandboxSpec): Promise<PodHandle> {
    const { source, baseTar } = await workspaceOf(spec);
    const ws = workspaceMount(spec);
    await agent.unpack(source);
    const h = new PodHandle(
      agent.container,
      spec.runId,
      handleOpts(maxExportBytes(ws.size, ws.inodes), baseTar),
      agent,
    );
    await markFilled(h);
    return h;
  }

  /** A warm Pod, filled and given to the run; undefined when none is ready or it failed. */
  async function fromPool(spec: SandboxSpec): Promise<SandboxHandle | undefined> {
    const warm = spec.userImage === true ? undefined : pool.take(spec);
    if (warm === undefined) return undefined;
    try {
      const h = await fill(warm, spec);
      // The run's only once complete: a worker dying mid-fill leaves a warm Pod (reaped),
      // never a run's Pod with half a workspace.
      await claimPod(core, warm.container, spec.runId, spec.tenantId);
      return h;
    } catch {
      await warm.discard();
      return undefined;
    }
  }

  return {
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      if (spec.network === "egress")
        throw new AgentdError("EUNIMPLEMENTED", "network egress: not yet on the kubernetes driver");
      const t0 = performance.now();
      const took = (start: "warm" | "cold"): void =>
        metrics.sandboxCreate.observe({ start }, (performance.now() - t0) / 1000);
      const warm = await fromPool(spec);
      if (warm !== undefined) {
        took("warm");
        return warm;
      }
      const agent = await startPod(spec, { runId: spec.runId, tenantId: spec.tenantId });
      try {
        const h = await fill(agent, spec);
        took("cold");
        return h;
      } catch (err) {
        await agent.discard();
        throw err instanceof AgentdError
          ? err
          : apiError(err, `fill the sandbox of run ${spec.runId}`);
      }
    },

    async find(runId: string): Promise<SandboxHandle | undefined> {
      let pod: V1Pod | undefined;
      try {
        pod = await podOfRun(core, namespace, managed, runId);
      } catch (err) {
        throw apiError(err, `find the sandbox of run ${runId}`);
      }
      if (pod === undefined) return undefined;
      const ws = workspaceMount({ ...specOfPod(pod), limits: limitsOfPod(pod) });
      const h = new PodHandle(refOf(pod), runId, handleOpts(maxExportBytes(ws.size, ws.inodes)));
      if ((await h.lost()) || !(await isFilled(h, MARK_ROOT))) {
        await h.destroy().catch(() => undefined);
        return undefined;
      }
      return h;
    },

    prewarm: (shape) => (shape.network === "egress" ? Promise.resolve() : pool.fill(shape)),
    close: () => pool.close(),

    reap: (isLive, opts) =>
      reapPods({ core, namespace, managed, owns: (uid) => pool.owns(uid), now }, isLive, opts),
  };
}

/** A warm Pod's name: the deployment's key and a random part. */
function warmName(managed: string): string {
  return podName(managed, `pool-${randomUUID().slice(0, 13)}`);
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
