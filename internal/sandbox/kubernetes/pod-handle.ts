/**
 * The handle of one run's sandbox Pod: every call, the workspace in and out, kill-all and
 * agentd's marks go through an agent of this handle's own, started in the Pod's container
 * over one pods/exec stream (pod-stream.ts). A Pod whose agent stream breaks, that is
 * deleted, evicted, or whose node is lost, is a lost sandbox exactly as a lost container
 * on Docker: the calls in flight fail, the Pod is deleted, the caller starts again from
 * the run's last snapshot (worker/workspace-recovery.ts).
 *
 * Why exec and not attach: the container runtime writes whatever the main process prints
 * to the node's container log (/var/log/pods, `kubectl logs`); frames on the attach
 * stream would put every tool's output and the whole workspace there. An exec's streams
 * are not logged.
 *
 * Must never: restart the Pod (its workspace is an emptyDir: a restart loses the run's
 * work), keep using a Pod that is not the one the handle was made for (its uid), or
 * delete a Pod another owner took over (OWNER_CHANGED).
 */
import type { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { AgentdError } from "../../errors.ts";
import { AgentChannel } from "../agent-channel.ts";
import { AgentLostError, agentExec } from "../agent-exec.ts";
import { capped } from "../docker-stream.ts";
import { handleDiff } from "../handle-diff.ts";
import type {
  DiffOptions,
  ExecRequest,
  ExecResult,
  SandboxHandle,
  WorkspaceDiff,
} from "../port.ts";
import { OWNER_CHANGED } from "../port.ts";
import { CONTAINER } from "./pod-manifest.ts";
import { execPath, openPodStream } from "./pod-stream.ts";
import { podProgress } from "./pod-wait.ts";

export interface PodRef {
  namespace: string;
  name: string;
  /** The Pod's uid: a Pod of the same name made later is another sandbox. */
  id: string;
}

export interface PodHandleOptions {
  kc: KubeConfig;
  core: CoreV1Api;
  agentPath: string;
  maxExportBytes: number;
  /** The workspace the run started from, for diff() without an argument. */
  baseTar?: Uint8Array;
  egress?: { host: string; port: number };
}

/**
 * Starts an agent of its own in the Pod and waits for its hello; `remove` is what the
 * channel's discard() does (deletes the Pod of a warm one).
 */
export async function podAgent(
  o: Pick<PodHandleOptions, "kc" | "agentPath">,
  pod: PodRef,
  remove: () => Promise<unknown> = async () => undefined,
): Promise<AgentChannel<PodRef>> {
  const s = await openPodStream(
    o.kc,
    execPath(pod.namespace, pod.name, CONTAINER, [o.agentPath, "--exit-on-eof"]),
  );
  const agent = AgentChannel.over(
    {
      container: pod,
      io: s.io,
      split: s.split,
      remove: async () => {
        await remove();
      },
    },
    Date.now(),
  );
  await agent.ready();
  return agent;
}

export class PodHandle implements SandboxHandle {
  readonly id: string;
  readonly runId: string;
  readonly egress?: { host: string; port: number };
  readonly #pod: PodRef;
  readonly #o: PodHandleOptions;
  #agent: Promise<AgentChannel<PodRef>> | undefined;
  #lost: AgentdError | undefined;
  #destroyed = false;

  constructor(pod: PodRef, runId: string, o: PodHandleOptions, agent?: AgentChannel<PodRef>) {
    this.#pod = pod;
    this.id = `${pod.namespace}/${pod.name}`;
    this.runId = runId;
    this.#o = o;
    if (o.egress !== undefined) this.egress = o.egress;
    if (agent !== undefined) this.#agent = Promise.resolve(agent);
  }

  /** The handle's agent, started on first use; throws once the sandbox is lost. */
  async #channel(): Promise<AgentChannel<PodRef>> {
    if (this.#lost !== undefined) throw this.#lost;
    if (this.#destroyed)
      throw new AgentdError("EIO", `the sandbox of run ${this.runId} was removed`);
    this.#agent ??= podAgent(this.#o, this.#pod);
    try {
      return await this.#agent;
    } catch (err) {
      this.#agent = undefined;
      throw await this.#loseIfGone(err);
    }
  }

  /** An agent that cannot be reached means a lost Pod only when the Pod is gone or ended. */
  async #loseIfGone(err: unknown): Promise<Error> {
    if (await this.lost().catch(() => false)) return this.#lose(err, "");
    return new AgentdError(
      "EUNAVAILABLE",
      `cannot reach the sandbox of run ${this.runId}: ${(err as Error).message}`,
    );
  }

  #lose(err: unknown, reason: string | undefined): AgentdError {
    this.#lost ??= new AgentdError(
      "EIO",
      `the sandbox of run ${this.runId} is lost: ${(err as Error).message}`,
      { cause: err },
    );
    const agent = this.#agent;
    this.#agent = undefined;
    void agent?.then(
      (a) => a.close(),
      () => undefined,
    );
    if (reason !== OWNER_CHANGED) void this.#delete().catch(() => undefined);
    return this.#lost;
  }

  /** Runs `fn` on the agent; a lost agent loses the Pod (as on Docker). */
  async #via<T>(fn: (a: AgentChannel<PodRef>) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const agent = await this.#channel();
    try {
      return await fn(agent);
    } catch (err) {
      if (!(err instanceof AgentLostError) && agent.alive()) throw err;
      if (this.#destroyed || (await this.#agent) !== agent) throw err;
      throw this.#lose(err, signal?.reason as string | undefined);
    }
  }

  async exec(req: ExecRequest): Promise<ExecResult> {
    if (req.argv.length === 0) throw new AgentdError("EVALIDATION", "exec: argv is empty");
    const r = await this.#via((a) => agentExec(a, req), req.signal);
    const { clean: _, ...result } = r;
    return result;
  }

  async *exportWorkspace(): AsyncGenerator<Uint8Array> {
    const what = `the workspace export of run ${this.runId}`;
    const agent = await this.#channel();
    const it = capped(agent.exportWorkspace(), this.#o.maxExportBytes, what)[
      Symbol.asyncIterator
    ]();
    try {
      for (;;) {
        const next = await this.#via(() => it.next());
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await it.return?.(undefined);
    }
  }

  diff(opts: DiffOptions = {}): Promise<WorkspaceDiff> {
    return handleDiff(() => this.exportWorkspace(), opts, this.#o.baseTar);
  }

  killAll(): Promise<void> {
    return this.#via((a) => a.killAll());
  }

  mark(name: "filled" | "recovering", op: "set" | "clear" | "test"): Promise<boolean> {
    return this.#via((a) => a.mark(name, op));
  }

  /** Lost: deleted, being deleted, ended, another Pod of the same name, or its agent gone. */
  async lost(): Promise<boolean> {
    if (this.#lost !== undefined || this.#destroyed) return true;
    try {
      const pod = await this.#o.core.readNamespacedPod({
        namespace: this.#pod.namespace,
        name: this.#pod.name,
      });
      if (pod.metadata?.uid !== this.#pod.id) return true;
      // A status not yet reported (the kubelet's relist lags an agent that answers) is no loss.
      const progress = podProgress(pod, CONTAINER);
      return progress !== undefined && progress !== "running";
    } catch (err) {
      if ((err as { code?: number }).code === 404) return true;
      throw new AgentdError(
        "EUNAVAILABLE",
        `cannot look at the sandbox of run ${this.runId}: ${(err as Error).message}`,
      );
    }
  }

  detach(): void {
    const agent = this.#agent;
    this.#agent = undefined;
    void agent?.then(
      (a) => a.close(),
      () => undefined,
    );
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.detach();
    await this.#delete();
  }

  async #delete(): Promise<void> {
    await this.#o.core
      .deleteNamespacedPod({
        namespace: this.#pod.namespace,
        name: this.#pod.name,
        gracePeriodSeconds: 0,
        body: { preconditions: { uid: this.#pod.id } },
      })
      .catch((err: { code?: number; message?: string }) => {
        // Gone already, or another Pod of that name (not ours to delete).
        if (err.code === 404 || err.code === 409) return;
        throw new AgentdError(
          "EUNAVAILABLE",
          `cannot delete the sandbox of run ${this.runId}: ${err.message}`,
        );
      });
  }
}
