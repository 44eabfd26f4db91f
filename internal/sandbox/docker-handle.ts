/**
 * The handle of one run's container on the Docker engine: exec with live output, timeouts
 * and caps on the whole process group; streamed workspace export; kill-all; destroy. A
 * container this process started with the agent (agent-channel.ts) runs all of them
 * through the agent; any other (an image without the agent, a container found after a
 * takeover or handed over) through `docker exec`. A container whose agent stops answering
 * is lost: the call fails, the container is removed, and every later call fails too.
 *
 * Must never: leave a process running past its timeout, restart the container (its
 * /workspace is a tmpfs: a restart would lose the run's work), or hold a workspace whole
 * in memory.
 */
import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { AgentChannel } from "./agent-channel.ts";
import {
  ABANDON_AFTER_MS,
  AgentLostError,
  agentExec,
  ESCALATE_AFTER_MS,
  maybeOom,
  WATCHDOG_GRACE_MS,
} from "./agent-exec.ts";
import type { ControlChannel } from "./control-channel.ts";
import { ChunkQueue, capped, demux, exitCodeOf, OutputCollector } from "./docker-stream.ts";
import {
  CWD_WITHIN_SCRIPT,
  EXPORT_SCRIPT,
  KILL_ALL_SCRIPT,
  KILL_SCRIPT,
  OOM_COUNT_SCRIPT,
  RUN_SCRIPT,
  RUN_SCRIPT_STDIN,
} from "./exec-scripts.ts";
import { handleDiff } from "./handle-diff.ts";
import type { DiffOptions, ExecRequest, ExecResult, SandboxHandle, WorkspaceDiff } from "./port.ts";
import { OWNER_CHANGED, WORKSPACE } from "./port.ts";
import { type MarkName, type MarkOp, rootMark } from "./root-marks.ts";

export const SANDBOX_USER = "1000:1000";

/** Extra processes allowed while agentd's own kill runs in a container at its pids limit. */
const PIDS_HEADROOM = 32;

export interface HandleOptions {
  /** Most bytes an export may have: the workspace's size limit plus tar's overhead. */
  maxExportBytes: number;
  /** The workspace the run started from, for diff() without an argument. */
  baseTar?: Uint8Array;
  /** The channel of a container this process started: its agent, or the control loop. */
  channel?: ControlChannel | AgentChannel;
  /** The run's egress proxy address (network "egress"). */
  egress?: { host: string; port: number };
  /**
   * A container found again whose image has the agent: the first use starts an agent of
   * this handle's own there (AgentChannel.exec); if that fails, `docker exec` per call.
   */
  agentPath?: string;
  /** The environment of agentd's own calls through that agent (AgentChannel.ownEnv). */
  ownEnv?: Readonly<Record<string, string>>;
  /** SandboxHandle.toolEnv. */
  toolEnv?: Readonly<Record<string, string>>;
  /** After the container is removed (the run's egress network goes with it). */
  afterDestroy?: () => Promise<void>;
  /** DockerSandboxHandle.startedAt. */
  startedAt?: string;
}

export class DockerSandboxHandle implements SandboxHandle {
  readonly id: string;
  readonly runId: string;
  readonly egress?: { host: string; port: number };
  readonly toolEnv?: Readonly<Record<string, string>>;
  /**
   * When the engine last started the container, as it said once the workspace was filled
   * (or the container found): another start since means its tmpfs workspace is gone.
   */
  startedAt: string | undefined;
  readonly #container: Docker.Container;
  readonly #opts: HandleOptions;
  #channel: ControlChannel | AgentChannel | undefined;
  /** Set when the agent stopped answering: every later operation fails with it. */
  #lost: AgentdError | undefined;
  #oomKills = 0;
  #destroyed = false;
  /**
   * Known to run nothing but its main process: a container this process started, or one
   * whose every call since the last confirmed kill-all ended with its own kill-all done
   * (an exit status below 128 from the exec's shell). killAll() is then a no-op.
   */
  #quiet: boolean;
  /**
   * A kill-all was confirmed since this handle got the container (or it made it): only then
   * can a call that cleaned up after itself make it quiet. A found container may still run
   * what its previous owner started, whatever this handle's own calls did (find()'s look at
   * the fill mark among them).
   */
  #known: boolean;
  #inFlight = 0;
  /** The second agent's start (agentPath), tried once. */
  #agentStart: Promise<void> | undefined;

  constructor(container: Docker.Container, runId: string, opts: HandleOptions) {
    this.#container = container;
    this.id = container.id;
    this.runId = runId;
    this.#opts = opts;
    if (opts.egress !== undefined) this.egress = opts.egress;
    if (opts.toolEnv !== undefined) this.toolEnv = opts.toolEnv;
    this.#channel = opts.channel;
    this.#quiet = opts.channel !== undefined;
    this.#known = this.#quiet;
    this.startedAt = opts.startedAt;
  }

  async exec(req: ExecRequest): Promise<ExecResult> {
    if (req.argv.length === 0) throw new AgentdError("EVALIDATION", "exec: argv is empty");
    // From here until it is known to have cleaned up after itself, the call may leave
    // processes behind: a kill-all meanwhile must really run.
    this.#inFlight++;
    this.#quiet = false;
    try {
      const agent = await this.#agent();
      return agent === undefined ? await this.#start(req) : await this.#agentExec(agent, req);
    } finally {
      this.#inFlight--;
    }
  }

  /** The agent of this container, while it answers; throws once the container is lost. */
  async #agent(): Promise<AgentChannel | undefined> {
    if (this.#lost !== undefined) throw this.#lost;
    const path = this.#opts.agentPath;
    if (this.#channel === undefined && path !== undefined && !this.#destroyed)
      this.#agentStart ??= this.#startAgent(path);
    await this.#agentStart;
    if (this.#lost !== undefined) throw this.#lost;
    return this.#channel instanceof AgentChannel ? this.#channel : undefined;
  }

  /** An agent of this handle's own in a found container; `docker exec` per call if it fails. */
  async #startAgent(path: string): Promise<void> {
    try {
      const agent = await AgentChannel.exec(this.#container, path, Date.now(), this.#opts.ownEnv);
      await agent.ready();
      if (this.#destroyed) agent.close();
      else this.#channel = agent;
    } catch {
      // Not there after all (a user's image copying our label), or the engine refused.
    }
  }

  async #agentExec(agent: AgentChannel, req: ExecRequest): Promise<ExecResult> {
    const r = await this.#viaAgent(agent, () => agentExec(agent, req), req.signal);
    if (r.clean && this.#inFlight === 1 && this.#known) this.#quiet = true;
    const { clean: _, ...result } = r;
    if (maybeOom(result)) result.oomKilled = await this.#checkOom();
    return result;
  }

  /**
   * Runs `fn` on the agent; when the agent is gone or stopped answering, the container is
   * lost: removed (unless another owner has it), and the error is what every later call gets.
   */
  async #viaAgent<T>(agent: AgentChannel, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof AgentLostError) && agent.alive()) throw err;
      // Let go of on purpose (detach, destroy): the container is not lost, only left.
      if (this.#channel !== agent) throw err;
      this.#lost = new AgentdError(
        "EIO",
        `the sandbox of run ${this.runId} is lost: ${(err as Error).message}`,
        { cause: err },
      );
      agent.close();
      if (signal?.reason !== OWNER_CHANGED)
        await this.#container.remove({ force: true, v: true }).catch(() => undefined);
      throw this.#lost;
    }
  }

  async #start(req: ExecRequest): Promise<ExecResult> {
    // No agent whose channel would break: a restart is seen by the engine's start time
    // (one inspect, beside a docker exec's cost), before anything runs in an empty workspace.
    if (this.startedAt !== undefined) await this.#stillFilled();
    const started = performance.now();
    const execId = randomUUID();
    const withStdin = req.stdin !== undefined;
    const watchdogS = ((req.timeoutMs + WATCHDOG_GRACE_MS) / 1000).toFixed(3);
    const argv =
      req.cwdWithin === undefined
        ? req.argv
        : [
            "sh",
            "-c",
            CWD_WITHIN_SCRIPT,
            "agentd-cwd",
            req.cwdWithin,
            req.cwd ?? WORKSPACE,
            ...req.argv,
          ];
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.#container.exec({
        Cmd: [
          "sh",
          "-c",
          withStdin ? RUN_SCRIPT_STDIN : RUN_SCRIPT,
          "agentd-exec",
          execId,
          watchdogS,
          ...argv,
        ],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: withStdin,
        User: SANDBOX_USER,
        WorkingDir: req.cwdWithin === undefined ? (req.cwd ?? WORKSPACE) : req.cwdWithin,
        Env: Object.entries(req.env ?? {}).map(([k, v]) => `${k}=${v}`),
      });
      stream = (await exec.start({ hijack: true, stdin: withStdin })) as unknown as Duplex;
    } catch (err) {
      throw dockerError(err, `exec in the sandbox of run ${this.runId}`);
    }
    return await this.#run(exec, stream, req, execId, started);
  }

  /** Follows a started exec to its end: output, timeout, cancel, and what it left running. */
  async #run(
    exec: Docker.Exec,
    stream: Duplex,
    req: ExecRequest,
    execId: string,
    started: number,
  ): Promise<ExecResult> {
    const withStdin = req.stdin !== undefined;
    const out = new OutputCollector(req.maxOutputBytes, req.onOutput);
    const ownerChanged = (): boolean => req.signal?.reason === OWNER_CHANGED;
    let killedFor: "timeout" | "cap" | "cancel" | undefined;
    let killing: Promise<void> | undefined;
    let escalation: NodeJS.Timeout | undefined;
    const kill = (why: "timeout" | "cap" | "cancel"): void => {
      if (killedFor !== undefined) return;
      killedFor = why;
      killing = this.#killGroup(execId);
      // The group kill trusts a pid file in /tmp, which the sandbox can rewrite, and the
      // in-container watchdog can be killed by the same user: if the call is still running
      // after a moment, everything but the main process goes; if even that does not end
      // the stream, the worker stops waiting for it.
      escalation = setTimeout(() => {
        if (ownerChanged()) return; // the rest of the container is not ours to kill
        killing = Promise.all([killing, this.killAll().catch(() => undefined)]).then(
          () => undefined,
        );
        escalation = setTimeout(() => stream.destroy(), ABANDON_AFTER_MS);
      }, ESCALATE_AFTER_MS);
    };
    const timer = setTimeout(() => kill("timeout"), req.timeoutMs);
    const onAbort = (): void => kill("cancel");
    req.signal?.addEventListener("abort", onAbort);
    if (req.signal?.aborted) kill("cancel");

    try {
      await new Promise<void>((resolve, reject) => {
        demux(stream, (name, chunk) => {
          if (!out.push(name, chunk)) kill("cap");
        });
        stream.on("end", resolve);
        stream.on("close", resolve);
        stream.on("error", reject);
        if (withStdin) {
          stream.write(Buffer.from(req.stdin as Uint8Array));
          stream.end();
        }
      });
    } finally {
      clearTimeout(timer);
      clearTimeout(escalation);
      req.signal?.removeEventListener("abort", onAbort);
    }
    await killing;
    const exitCode = await exitCodeOf(exec);
    // The exec's shell kills what the call left running, then exits with the command's
    // status. A status from a signal (or 255: that kill-all failed) may mean the command
    // killed that shell first: then nothing was killed, and the worker does it now.
    const abnormal = exitCode >= 128 || exitCode < 0 || killedFor !== undefined;
    if (abnormal && !ownerChanged()) await this.#killAllNow();
    else if (this.#inFlight === 1 && this.#known) this.#quiet = true;
    const { stdout, stderr, truncated } = out.finish();
    const result: ExecResult = {
      exitCode,
      stdout,
      stderr,
      truncated,
      timedOut: killedFor === "timeout",
      cancelled: killedFor === "cancel",
      oomKilled: false,
      durationMs: Math.round(performance.now() - started),
    };
    if (maybeOom(result)) result.oomKilled = await this.#checkOom();
    return result;
  }

  /** Kills an exec's process group, making room at the pids limit if it has to. */
  async #killGroup(execId: string): Promise<void> {
    const argv = ["sh", "-c", KILL_SCRIPT, "agentd-kill", execId];
    const ok = async (): Promise<boolean> => {
      const { exitCode } = await this.#helperExec(argv);
      return exitCode === 0 || exitCode === 3;
    };
    await this.#withRoom(ok, "stop a process group");
  }

  async killAll(): Promise<void> {
    const agent = await this.#agent();
    if (this.#quiet && this.#inFlight === 0) return;
    if (agent !== undefined) {
      await this.#viaAgent(agent, () => agent.killAll());
      this.#known = true;
      if (this.#inFlight === 0) this.#quiet = true;
      return;
    }
    await this.#killAllNow();
  }

  async #killAllNow(): Promise<void> {
    const argv = ["sh", "-c", KILL_ALL_SCRIPT, "agentd-killall"];
    await this.#withRoom(
      async () => (await this.#helperExec(argv)).exitCode === 0,
      "stop every process",
    );
    this.#known = true;
    if (this.#inFlight === 0) this.#quiet = true;
  }

  /**
   * Runs `attempt` (true when it worked); when it keeps failing — a fork bomb at the pids
   * limit leaves no room for even a kill — raises the limit by a few processes for agentd's
   * own kill and puts it back afterwards. Why not restart the container: its /workspace is
   * a tmpfs and would lose the run's work.
   */
  async #withRoom(attempt: () => Promise<boolean>, doing: string): Promise<void> {
    for (let i = 0; i < 2; i++) {
      if (await attempt().catch(() => false)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    const info = await this.#container.inspect().catch((err: unknown) => {
      throw dockerError(err, `${doing} in the sandbox of run ${this.runId}`);
    });
    const limit = info.HostConfig.PidsLimit ?? 0;
    if (limit > 0) await this.#container.update({ PidsLimit: limit + PIDS_HEADROOM });
    try {
      for (let i = 0; i < 5; i++) {
        if (await attempt().catch(() => false)) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      if (limit > 0) await this.#container.update({ PidsLimit: limit }).catch(() => undefined);
    }
    throw new AgentdError("EIO", `cannot ${doing} in the sandbox of run ${this.runId}`);
  }

  async #checkOom(): Promise<boolean> {
    try {
      const { stdout: text } = await this.#helperExec(["sh", "-c", OOM_COUNT_SCRIPT]);
      const m = /oom_kill (\d+)/.exec(text);
      const n = m === null ? 0 : Number(m[1]);
      const oom = n > this.#oomKills;
      this.#oomKills = n;
      return oom;
    } catch {
      return false;
    }
  }

  /** Runs a short helper command as the sandbox user: its exit code and (capped) stdout. */
  async #helperExec(argv: string[]): Promise<{ exitCode: number; stdout: string }> {
    const agent = await this.#agent();
    if (agent !== undefined) {
      const r = await this.#viaAgent(agent, () =>
        agentExec(
          agent,
          { argv, env: { ...agent.ownEnv }, timeoutMs: 10_000, maxOutputBytes: 64 * 1024 },
          true,
        ),
      );
      return { exitCode: r.exitCode, stdout: r.stdout };
    }
    const exec = await this.#container.exec({
      Cmd: argv,
      AttachStdout: true,
      AttachStderr: true,
      User: SANDBOX_USER,
    });
    const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
    let stdout = "";
    demux(stream, (name, chunk) => {
      if (name === "stdout" && stdout.length < 64 * 1024) stdout += chunk.toString("utf8");
    });
    await new Promise((resolve) => {
      stream.on("end", resolve);
      stream.on("close", resolve);
      stream.on("error", resolve);
    });
    return { exitCode: await exitCodeOf(exec), stdout };
  }

  async *exportWorkspace(): AsyncGenerator<Uint8Array> {
    const max = this.#opts.maxExportBytes;
    const what = `the workspace export of run ${this.runId}`;
    const agent = await this.#agent();
    if (agent !== undefined) {
      yield* this.#agentExport(agent, max, what);
      return;
    }
    if (this.#channel?.alive()) {
      let sent = 0;
      try {
        for await (const chunk of capped(this.#channel.exportWorkspace(), max, what)) {
          sent += chunk.byteLength;
          yield chunk;
        }
        return;
      } catch (err) {
        // Nothing reached the consumer yet: the exec below serves the same export.
        // Otherwise the consumer saw part of an archive: it must fail, not get a second one.
        this.#channel?.close();
        this.#channel = undefined;
        if (sent > 0 || (err instanceof AgentdError && err.code === "ETOOLARGE")) throw err;
      }
    }
    yield* capped(this.#execExport(), max, what);
  }

  /** The export through the agent; a lost agent loses the container. */
  async *#agentExport(agent: AgentChannel, max: number, what: string): AsyncGenerator<Uint8Array> {
    const it = capped(agent.exportWorkspace(), max, what)[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await this.#viaAgent(agent, () => it.next());
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await it.return?.(undefined);
    }
  }

  /** `tar -c` of the workspace through `docker exec`, streamed with backpressure. */
  async *#execExport(): AsyncGenerator<Uint8Array> {
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.#container.exec({
        Cmd: ["sh", "-c", EXPORT_SCRIPT],
        AttachStdout: true,
        AttachStderr: true,
        User: SANDBOX_USER,
      });
      stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
    } catch (err) {
      throw dockerError(err, `export the workspace of run ${this.runId}`);
    }
    let stderr = "";
    const queue = new ChunkQueue(
      () => stream.pause(),
      () => stream.resume(),
    );
    demux(stream, (name, chunk) => {
      if (name === "stdout") queue.push(chunk);
      else if (stderr.length < 4096) stderr += chunk.toString("utf8");
    });
    stream.on("end", () => queue.end());
    stream.on("close", () => queue.end());
    stream.on("error", (err) => queue.end(err));
    let complete = false;
    try {
      yield* queue.drain();
      complete = true;
    } finally {
      if (!complete) stream.destroy();
    }
    const code = await exitCodeOf(exec);
    if (code !== 0)
      throw new AgentdError(
        "EIO",
        `cannot export the workspace of run ${this.runId}: tar exited ${code}: ${stderr.trim().slice(0, 500)}`,
      );
  }

  diff(opts: DiffOptions = {}): Promise<WorkspaceDiff> {
    return handleDiff(() => this.exportWorkspace(), opts, this.#opts.baseTar);
  }

  /** Throws (and the handle is lost from then on) when the container restarted or went. */
  async #stillFilled(): Promise<void> {
    const { State } = await this.#container.inspect().catch(() => ({ State: undefined }));
    if (State?.Running === true && State.StartedAt === this.startedAt) return;
    this.#lost = new AgentdError(
      "EIO",
      `the sandbox of run ${this.runId} is lost: its container ${State === undefined ? "is gone" : State.Running ? "restarted (its workspace is empty)" : "stopped"}`,
    );
    throw this.#lost;
  }

  /**
   * Lost: stopped, gone, its main process's channel ended (the container stopped or
   * restarted meanwhile), or started again since its workspace was filled (a restart that
   * came and went between two looks: its tmpfs workspace is empty).
   */
  async lost(): Promise<boolean> {
    if (this.#lost !== undefined || this.#destroyed) return true;
    if (this.#channel !== undefined && !this.#channel.alive()) return true;
    try {
      const { State } = await this.#container.inspect();
      return !State.Running || (this.startedAt !== undefined && State.StartedAt !== this.startedAt);
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return true;
      throw dockerError(err, `look at the sandbox of run ${this.runId}`);
    }
  }

  /** Through the agent when it keeps marks (no docker exec), else one `docker exec` as root. */
  async mark(name: MarkName, op: MarkOp): Promise<boolean> {
    const agent = await this.#agent();
    if (agent?.marks === true) return this.#viaAgent(agent, () => agent.mark(name, op));
    return rootMark(this.#container, this.toolEnv ?? {}, name, op);
  }

  detach(): void {
    const channel = this.#channel;
    this.#channel = undefined;
    channel?.close();
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    const channel = this.#channel;
    this.#channel = undefined;
    channel?.close();
    await this.#container.remove({ force: true, v: true }).catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw dockerError(err, `remove the sandbox of run ${this.runId}`);
    });
    await this.#opts.afterDestroy?.();
  }
}

/** Docker failures as typed errors: a missing image is ENOTFOUND, an unreachable engine EUNAVAILABLE. */
export function dockerError(err: unknown, doing: string, image?: string): AgentdError {
  const e = err as { statusCode?: number; message?: string; code?: string };
  if (e.statusCode === 404 && image !== undefined && /image/i.test(e.message ?? "")) {
    return new AgentdError(
      "ENOTFOUND",
      `unknown sandbox image ${image}: build it with 'make images' or set sandbox.image`,
      { cause: err },
    );
  }
  if (e.code === "ECONNREFUSED" || e.code === "ENOENT" || e.code === "EACCES") {
    return new AgentdError(
      "EUNAVAILABLE",
      `cannot ${doing}: the Docker engine is not reachable (${e.code})`,
      { cause: err },
    );
  }
  return new AgentdError("EIO", `cannot ${doing}: ${e.message ?? String(err)}`, { cause: err });
}
