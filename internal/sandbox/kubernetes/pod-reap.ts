/**
 * The sandbox namespace's clean-up, as the Docker driver's reap(): Pods of runs no longer
 * live go; warm Pods of another keeper go when it is known dead, or when they idled past
 * twice the warm age (their keeper died unseen), or stopped running. A worker's own warm
 * Pods are left to its pool.
 *
 * Must never: delete a Pod without this deployment's managed label, or a live run's Pod.
 */
import type { CoreV1Api, V1Pod } from "@kubernetes/client-node";
import type { ReapOptions } from "../port.ts";
import { WARM_MAX_AGE_MS } from "../warm-pool.ts";
import {
  ANNOTATION_POOL_OWNER,
  ANNOTATION_RUN,
  CONTAINER,
  LABEL_MANAGED,
  LABEL_POOL,
  LABEL_RUN,
  runLabel,
} from "./pod-manifest.ts";
import { podProgress } from "./pod-wait.ts";

export interface ReapScope {
  core: CoreV1Api;
  namespace: string;
  managed: string;
  /** True for warm Pods this process keeps (its pool). */
  owns(uid: string): boolean;
  now(): number;
}

export async function reapPods(
  s: ReapScope,
  isLive: (runId: string) => Promise<boolean> | boolean,
  opts: ReapOptions = {},
): Promise<string[]> {
  const list = await s.core.listNamespacedPod({
    namespace: s.namespace,
    labelSelector: `${LABEL_MANAGED}=${s.managed}`,
  });
  const reaped: string[] = [];
  for (const pod of list.items) {
    const name = pod.metadata?.name ?? "";
    const runId = pod.metadata?.annotations?.[ANNOTATION_RUN];
    if (runId !== undefined && pod.metadata?.labels?.[LABEL_RUN] === runLabel(runId)) {
      if (await isLive(runId)) continue;
      await remove(s, name);
      reaped.push(runId);
    } else if (
      pod.metadata?.labels?.[LABEL_POOL] !== undefined &&
      (await staleWarm(s, pod, opts))
    ) {
      await remove(s, name);
    }
  }
  return reaped;
}

async function staleWarm(s: ReapScope, pod: V1Pod, opts: ReapOptions): Promise<boolean> {
  if (s.owns(pod.metadata?.uid ?? "")) return false;
  const made = pod.metadata?.creationTimestamp;
  const age = made === undefined ? Number.POSITIVE_INFINITY : s.now() - new Date(made).getTime();
  if (age > 2 * WARM_MAX_AGE_MS) return true;
  const progress = podProgress(pod, CONTAINER);
  if (progress !== undefined && progress !== "running") return true;
  const owner = pod.metadata?.annotations?.[ANNOTATION_POOL_OWNER];
  return owner !== undefined && (await opts.poolOwnerDead?.(owner)) === true;
}

function remove(s: ReapScope, name: string): Promise<unknown> {
  return s.core
    .deleteNamespacedPod({ namespace: s.namespace, name, gracePeriodSeconds: 0 })
    .catch(() => undefined);
}
