/**
 * A new Pod's agent, as soon as its container runs: the agent is tried over pods/exec
 * every 50 ms while one watch waits for the Pod's status, because the kubelet reports a
 * started container up to a second later (its relist period) than an exec can reach it.
 * The watch still decides failures: an image that cannot be had, a container that ended,
 * a Pod deleted, the start timeout.
 *
 * Must never: return an agent of another Pod than `ref` (exec names the Pod; a Pod of the
 * same name made later has another uid, checked by the handle), or poll past the timeout.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { AgentChannel } from "../agent-channel.ts";
import { type PodRef, podAgent } from "./pod-handle.ts";
import { CONTAINER } from "./pod-manifest.ts";
import { waitRunning } from "./pod-wait.ts";

const RETRY_MS = 50;

export async function agentWhenUp(
  o: { kc: KubeConfig; agentPath: string; timeoutMs: number },
  ref: PodRef,
  remove: () => Promise<unknown>,
): Promise<AgentChannel<PodRef>> {
  const stop = new AbortController();
  let failed: unknown;
  let wake: () => void = () => undefined;
  const running = waitRunning(o.kc, ref.namespace, ref.name, CONTAINER, o.timeoutMs, stop.signal);
  running.then(
    () => wake(),
    (err: unknown) => {
      failed = err;
      wake();
    },
  );
  try {
    for (;;) {
      if (failed !== undefined) throw failed;
      try {
        return await podAgent(o, ref, remove);
      } catch {
        // not running yet: the next try, or the watch's verdict
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, RETRY_MS);
      });
    }
  } finally {
    stop.abort();
  }
}
