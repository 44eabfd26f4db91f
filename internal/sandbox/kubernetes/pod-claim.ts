/**
 * Which Pod is whose: a run's Pod carries the run's label and annotation (the annotation
 * holds the exact id; labels are restricted); a warm Pod carries the pool label and its
 * keeper in an annotation until a run claims it, when one merge patch gives it the run's
 * label and annotations and takes the pool's away (Pods cannot be renamed; their labels
 * can). find() looks a run's Pod up by its label.
 *
 * Must never: claim a Pod another process took (the patch is conditioned on the Pod's
 * resourceVersion), or return a Pod whose annotation names another run.
 */
import {
  type CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import {
  ANNOTATION_POOL_OWNER,
  ANNOTATION_RUN,
  ANNOTATION_TENANT,
  LABEL_MANAGED,
  LABEL_POOL,
  LABEL_RUN,
  runLabel,
} from "./pod-manifest.ts";

/** Gives the warm Pod `pod` to run `runId` of `tenantId`. */
export async function claimPod(
  core: CoreV1Api,
  pod: { namespace: string; name: string; resourceVersion?: string },
  runId: string,
  tenantId: string,
): Promise<void> {
  await core.patchNamespacedPod(
    {
      namespace: pod.namespace,
      name: pod.name,
      body: {
        metadata: {
          ...(pod.resourceVersion === undefined ? {} : { resourceVersion: pod.resourceVersion }),
          labels: { [LABEL_RUN]: runLabel(runId), [LABEL_POOL]: null },
          annotations: {
            [ANNOTATION_RUN]: runId,
            ...(tenantId === "" ? {} : { [ANNOTATION_TENANT]: tenantId }),
            [ANNOTATION_POOL_OWNER]: null,
          },
        },
      },
    },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
}

/** The Pod of run `runId` of this deployment, if there is one. */
export async function podOfRun(
  core: CoreV1Api,
  namespace: string,
  managed: string,
  runId: string,
): Promise<V1Pod | undefined> {
  const list = await core.listNamespacedPod({
    namespace,
    labelSelector: `${LABEL_MANAGED}=${managed},${LABEL_RUN}=${runLabel(runId)}`,
  });
  return list.items.find((p) => p.metadata?.annotations?.[ANNOTATION_RUN] === runId);
}
