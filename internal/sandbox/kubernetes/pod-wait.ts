/**
 * Waits for a sandbox Pod to run, through one watch on the API server (no polling: fifty
 * runs starting at once are fifty watches, not a thousand reads a second), and says why
 * when it never will: an image that cannot be had, a container that ended, a Pod deleted,
 * evicted or never scheduled within the time.
 *
 * Must never: report Running before the sandbox container itself runs, or wait past its
 * deadline.
 */
import { type KubeConfig, type V1Pod, Watch } from "@kubernetes/client-node";
import { AgentdError } from "../../errors.ts";

/** Waiting reasons that end a start (the kubelet would retry some for ever). */
const FATAL_WAITING = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "ErrImageNeverPull",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);

/** "running", a reason it never will, or undefined (still starting). */
export function podProgress(pod: V1Pod, container: string): "running" | string | undefined {
  const phase = pod.status?.phase;
  const st = pod.status?.containerStatuses?.find((c) => c.name === container);
  if (pod.metadata?.deletionTimestamp !== undefined) return "the Pod is being deleted";
  if (phase === "Failed" || phase === "Succeeded")
    return `the Pod ended (${pod.status?.reason ?? phase}${pod.status?.message ? `: ${pod.status.message}` : ""})`;
  if (st?.state?.running !== undefined) return "running";
  if (st?.state?.terminated !== undefined)
    return `the sandbox container ended (${st.state.terminated.reason ?? "exit"} ${st.state.terminated.exitCode})`;
  const waiting = st?.state?.waiting;
  if (waiting?.reason !== undefined && FATAL_WAITING.has(waiting.reason))
    return `${waiting.reason}${waiting.message ? `: ${waiting.message}` : ""}`;
  return undefined;
}

/** What a Pod that does not run yet waits for (the scheduler's message, a waiting reason). */
function stillStarting(pod: V1Pod): string | undefined {
  const unscheduled = pod.status?.conditions?.find(
    (c) => c.type === "PodScheduled" && c.status === "False",
  );
  const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason;
  return unscheduled?.message ?? waiting ?? pod.status?.phase;
}

/** Resolves with the running Pod; throws EUNAVAILABLE naming why it will not run. */
export async function waitRunning(
  kc: KubeConfig,
  namespace: string,
  name: string,
  container: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<V1Pod> {
  const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  let abort: AbortController | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<V1Pod>((resolve, reject) => {
      let last = "it was not scheduled";
      timer = setTimeout(
        () =>
          reject(
            new AgentdError(
              "EUNAVAILABLE",
              `the sandbox Pod ${name} did not start within ${timeoutMs} ms (${last})`,
            ),
          ),
        timeoutMs,
      );
      signal?.addEventListener(
        "abort",
        () => reject(new AgentdError("ECANCELLED", "no longer waited for")),
        { once: true },
      );
      const fail = (why: string) =>
        reject(new AgentdError("EUNAVAILABLE", `the sandbox Pod ${name} ${why}`));
      const onEvent = (phase: string, pod: V1Pod): void => {
        const p =
          phase === "DELETED" ? "was deleted while it started" : podProgress(pod, container);
        if (p === "running") resolve(pod);
        else if (p !== undefined) fail(p.startsWith("was ") ? p : `cannot run: ${p}`);
        else last = stillStarting(pod) ?? last;
      };
      const onDone = (err: unknown): void => {
        if (err)
          reject(
            new AgentdError(
              "EUNAVAILABLE",
              `watching the sandbox Pod ${name} failed: ${(err as Error).message}`,
            ),
          );
        else
          reject(
            new AgentdError(
              "EUNAVAILABLE",
              `the watch of the sandbox Pod ${name} ended before it ran`,
            ),
          );
      };
      new Watch(kc)
        .watch(path, { fieldSelector: `metadata.name=${name}` }, onEvent, onDone)
        .then((a) => {
          abort = a;
        }, onDone);
    });
  } finally {
    clearTimeout(timer);
    abort?.abort();
  }
}
