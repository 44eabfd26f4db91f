/**
 * The Sandbox port on the Docker engine (dockerode). One hardened container per run:
 * non-root user 1000, every capability dropped, no-new-privileges, read-only root with a
 * writable /workspace volume and a tmpfs /tmp, memory/CPU/pids limits, no network unless
 * asked, an init that reaps zombies, labels agentd.run-id / agentd.tenant.
 *
 * Must never: bind-mount a host path, mount the Docker socket, run anything privileged,
 * or leave a process running past its timeout.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { KILL_SCRIPT, OOM_COUNT_SCRIPT, RUN_SCRIPT, RUN_SCRIPT_STDIN } from "./exec-scripts.ts";
import type {
  ExecRequest,
  ExecResult,
  OutputStreamName,
  Sandbox,
  SandboxHandle,
  SandboxShape,
  SandboxSpec,
  WorkspaceDiff,
} from "./port.ts";
import { WORKSPACE } from "./port.ts";
import { packWorkspace, readWorkspaceArchive, SANDBOX_EXPORT_LIMITS } from "./workspace-archive.ts";
import { diffWorkspaces } from "./workspace-diff.ts";

export const LABEL_RUN = "agentd.run-id";
export const LABEL_TENANT = "agentd.tenant";
export const LABEL_MANAGED = "agentd.managed";
/** On warm containers: the process that keeps them (DockerSandboxOptions.poolOwner). */
export const LABEL_POOL = "agentd.pool";

export interface DockerSandboxOptions {
  docker: Docker;
  /**
   * Value of the agentd.managed label on containers this instance makes and reaps.
   * Default "true"; tests use a unique value so they never touch each other's containers.
   */
  managedLabel?: string;
  /**
   * Started, empty containers kept ready per sandbox shape (image, limits, network, env):
   * a run then only waits for its workspace to be copied in, not for a container to be
   * created and started. Default 0 (every create is cold).
   */
  warm?: number;
  /**
   * Who keeps the warm containers (label agentd.pool), e.g. the worker id; default a
   * random id. Lets an operator (or a test) find the warm containers of one process.
   */
  poolOwner?: string;
  now?: () => number;
}

export interface DockerSandbox extends Sandbox {
  /**
   * Fills the warm pool for `shape` (no-op without `warm`); resolves when it is full. A
   * worker calls it at start with its policy's shape, so even its first run starts warm.
   */
  prewarm(shape: SandboxShape): Promise<void>;
  /** Removes this instance's idle warm containers and stops refilling. */
  close(): Promise<void>;
}

const SANDBOX_USER = "1000:1000";
/** PID 1 of every sandbox: sleeps until the container is removed. */
const IDLE_CMD = ["sleep", "2147483647"];
/**
 * PID 1 of a warm container, a small control loop on its attached stdin/stdout (the
 * attach is made before the start, so nothing is missed): it reads the size of its run's
 * workspace archive, unpacks that many bytes as the sandbox user and says so; then it
 * answers "export NONCE" with the workspace as a tar and a trailer naming the nonce and
 * tar's exit status. Handing a workspace over and taking it back are pipe transfers, not
 * docker cp calls. When stdin closes (the worker went away) it sleeps like IDLE_CMD, so a
 * worker taking the run over finds the container. The archive was validated and
 * normalised before (relative paths under the root, owned by uid 1000, no set-id bits).
 */
const WARM_SH = `read -r n || exit 1
head -c "$n" | tar -x -p -f - -C /workspace || exit 1
echo agentd-ready
while read -r cmd nonce; do
  [ "$cmd" = export ] || break
  tar -c -f - -C /workspace .; s=$?
  printf '\\nagentd-done %s %s\\n' "$nonce" "$s"
done
exec sleep 2147483647`;
const WARM_CMD = ["sh", "-c", WARM_SH];
const WARM_READY = "agentd-ready\n";
/** A workspace bigger than this is unpacked by the slow path (docker cp into a cold container). */
const WARM_MAX_TAR_BYTES = 256 * 1024 * 1024;
/** An export through the channel larger than this fails it (the engine's archive API then serves). */
const WARM_MAX_EXPORT_BYTES = 1024 * 1024 * 1024;

/**
 * A run's container is named `agentd-<managed key>.<run id>` (run ids have no dots): find()
 * is one lookup, and a warm container, created before its run was known (labels cannot be
 * changed), becomes the run's by a rename. Warm containers are `agentd-<key>.pool.<id>`.
 */
export function containerName(managed: string, runId: string): string {
  return `${namePrefix(managed)}${runId}`;
}

function namePrefix(managed: string): string {
  return `agentd-${createHash("sha256").update(managed).digest("hex").slice(0, 8)}.`;
}

/**
 * A warm container idle for longer is not handed out (it is replaced); other processes'
 * warm containers older than twice this are removed by reap() (their process died).
 */
const WARM_MAX_AGE_MS = 10 * 60_000;

export function createDockerSandbox(opts: DockerSandboxOptions): DockerSandbox {
  const docker = opts.docker;
  const managed = opts.managedLabel ?? "true";
  const prefix = namePrefix(managed);
  const warmTarget = opts.warm ?? 0;
  const poolOwner = opts.poolOwner ?? randomUUID();
  const maxAge = WARM_MAX_AGE_MS;
  const now = opts.now ?? Date.now;
  /** Ready warm containers per shape key (oldest first) and fills under way. */
  const pool = new Map<string, WarmContainer[]>();
  const filling = new Map<string, Promise<void>>();
  /** Ids of every warm container this instance made and did not hand out or remove. */
  const mine = new Set<string>();
  let closed = false;

  const handleFor = (
    container: Docker.Container,
    runId: string,
    baseTar: Uint8Array | undefined,
  ): SandboxHandle => new DockerSandboxHandle(container, runId, baseTar);

  function containerOptions(
    shape: SandboxShape,
    name: string,
    labels: Record<string, string>,
  ): Docker.ContainerCreateOptions {
    const env = Object.entries({ HOME: "/tmp", ...shape.env }).map(([k, v]) => `${k}=${v}`);
    return {
      name,
      Image: shape.image,
      Cmd: IDLE_CMD,
      User: SANDBOX_USER,
      WorkingDir: WORKSPACE,
      Env: env,
      Labels: { ...labels, [LABEL_MANAGED]: managed },
      NetworkDisabled: shape.network === "none",
      Volumes: { [WORKSPACE]: {} },
      HostConfig: {
        NetworkMode: shape.network === "none" ? "none" : "bridge",
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
        ReadonlyRootfs: true,
        Tmpfs: { "/tmp": `rw,nosuid,nodev,size=${Math.floor(shape.limits.tmpBytes)},mode=1777` },
        Memory: Math.floor(shape.limits.memoryBytes),
        MemorySwap: Math.floor(shape.limits.memoryBytes),
        NanoCpus: Math.floor(shape.limits.cpus * 1e9),
        PidsLimit: shape.limits.pids,
        Init: true,
        Privileged: false,
        IpcMode: "private",
        // Nothing a sandbox prints to its PID 1's stdout or stderr (a warm container's
        // exports among it) is kept on the host's disk.
        LogConfig: { Type: "none", Config: {} },
      },
    };
  }

  const shapeKey = (s: SandboxShape): string =>
    JSON.stringify([s.image, s.limits, s.network, Object.entries(s.env ?? {}).sort()]);

  /** Tops the pool of `shape` up to `warm` ready containers (one fill at a time per shape). */
  function fill(shape: SandboxShape): Promise<void> {
    const key = shapeKey(shape);
    const running = filling.get(key);
    if (running !== undefined) return running;
    const p = (async () => {
      for (;;) {
        const ready = pool.get(key) ?? [];
        if (closed || ready.length >= warmTarget) return;
        const c = await docker.createContainer({
          ...containerOptions(shape, `${prefix}pool.${randomUUID()}`, { [LABEL_POOL]: poolOwner }),
          Cmd: WARM_CMD,
          OpenStdin: true,
          StdinOnce: true,
          AttachStdin: true,
          AttachStdout: true,
          AttachStderr: true,
        });
        mine.add(c.id);
        let w: WarmContainer;
        try {
          w = await WarmContainer.start(c, now());
        } catch (err) {
          mine.delete(c.id);
          await c.remove({ force: true, v: true }).catch(() => undefined);
          throw err;
        }
        if (closed) {
          mine.delete(c.id);
          await w.discard();
          return;
        }
        pool.set(key, [...(pool.get(key) ?? []), w]);
      }
    })().finally(() => filling.delete(key));
    filling.set(key, p);
    return p;
  }

  /** A ready warm container for `shape`, if one young enough is there; refills behind. */
  function take(shape: SandboxShape): WarmContainer | undefined {
    if (warmTarget <= 0 || closed) return undefined;
    const key = shapeKey(shape);
    // Runs of one worker share its policy's shape: another shape's containers are left
    // over from before a policy reload and go.
    for (const [k, idle] of pool) {
      if (k === key) continue;
      pool.delete(k);
      for (const w of idle) {
        mine.delete(w.container.id);
        void w.discard();
      }
    }
    const ready = pool.get(key) ?? [];
    let got: WarmContainer | undefined;
    while (got === undefined && ready.length > 0) {
      const w = ready.shift() as WarmContainer;
      mine.delete(w.container.id);
      if (now() - w.at <= maxAge && w.alive()) got = w;
      else void w.discard();
    }
    // A failed refill only means the next create is cold.
    fill(shape).catch(() => undefined);
    return got;
  }

  return {
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      const tar =
        spec.workspaceTar !== undefined && spec.workspaceTar.byteLength > 0
          ? Buffer.from(spec.workspaceTar)
          : undefined;
      // An empty workspace is an empty archive (tar refuses zero bytes).
      const base = tar ?? (await packWorkspace([]));
      const warm = base.byteLength <= WARM_MAX_TAR_BYTES ? take(spec) : undefined;
      if (warm !== undefined) {
        try {
          // The workspace goes in through PID 1's stdin; the rename makes the container the
          // run's (find, reap).
          // Renamed only once the workspace is complete: a worker dying mid-unpack leaves
          // an abandoned warm container (reaped), never a run's container with half a
          // workspace that a taker would go on with.
          await warm.unpack(base);
          await warm.container.rename({ name: containerName(managed, spec.runId) });
          return new DockerSandboxHandle(warm.container, spec.runId, base, warm);
        } catch {
          // Gone meanwhile (removed by hand, engine restarted) or the unpack failed: make
          // one the slow way.
          await warm.discard();
        }
      }
      let container: Docker.Container;
      try {
        container = await docker.createContainer(
          containerOptions(spec, containerName(managed, spec.runId), {
            [LABEL_RUN]: spec.runId,
            [LABEL_TENANT]: spec.tenantId,
          }),
        );
      } catch (err) {
        throw dockerError(err, `create the sandbox of run ${spec.runId}`, spec.image);
      }
      try {
        if (tar !== undefined) {
          // The workspace volume exists from create on; docker extracts into it (a volume
          // is writable even with a read-only root). Paths were validated before.
          await container.putArchive(tar, { path: WORKSPACE });
        }
        await container.start();
      } catch (err) {
        await container.remove({ force: true, v: true }).catch(() => undefined);
        throw dockerError(err, `start the sandbox of run ${spec.runId}`, spec.image);
      }
      return handleFor(container, spec.runId, base);
    },

    async find(runId: string): Promise<SandboxHandle | undefined> {
      const c = docker.getContainer(containerName(managed, runId));
      let info: Docker.ContainerInspectInfo;
      try {
        info = await c.inspect();
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return undefined;
        throw dockerError(err, `find the sandbox of run ${runId}`);
      }
      if (info.Config.Labels[LABEL_MANAGED] !== managed) return undefined;
      if (!info.State.Running) {
        // Stopped (the engine restarted, its PID 1 was killed): its workspace volume holds
        // the run's latest work, so start it again; only one that cannot start goes (the
        // caller owns the run and starts over from the last snapshot).
        try {
          await c.start();
        } catch {
          await c.remove({ force: true, v: true }).catch(() => undefined);
          return undefined;
        }
      }
      return handleFor(docker.getContainer(info.Id), runId, undefined);
    },

    async reap(isLive): Promise<string[]> {
      const list = await docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_MANAGED}=${managed}`] },
      });
      const reaped: string[] = [];
      const remove = (id: string, what: string) =>
        docker
          .getContainer(id)
          .remove({ force: true, v: true })
          .catch((err: { statusCode?: number }) => {
            if (err.statusCode !== 404) throw dockerError(err, `remove ${what}`);
          });
      for (const c of list) {
        const name = (c.Names[0] ?? "").replace(/^\//, "");
        const rest = name.startsWith(prefix) ? name.slice(prefix.length) : undefined;
        if (c.Labels[LABEL_POOL] !== undefined && rest?.startsWith("pool.")) {
          // Another process's warm container that exited (its keeper went before handing it
          // out: stdin closed) or is too old to be handed out: abandoned. One just created
          // and not started yet is left alone.
          const exited = c.State === "exited" || c.State === "dead";
          if (!mine.has(c.Id) && (exited || now() - c.Created * 1000 > 2 * maxAge))
            await remove(c.Id, "an abandoned warm sandbox");
          continue;
        }
        const runId = c.Labels[LABEL_RUN] ?? rest;
        if (runId === undefined || (await isLive(runId))) continue;
        await remove(c.Id, `the sandbox of run ${runId}`).then(() => reaped.push(runId));
      }
      return reaped;
    },

    async prewarm(shape: SandboxShape): Promise<void> {
      if (warmTarget > 0 && !closed) await fill(shape);
    },

    async close(): Promise<void> {
      closed = true;
      await Promise.allSettled(filling.values());
      const idle = [...pool.values()].flat();
      pool.clear();
      await Promise.allSettled(
        idle.map((w) => {
          mine.delete(w.container.id);
          return w.discard();
        }),
      );
    },
  };
}

/**
 * A started warm container and the control channel to its PID 1 (WARM_SH). Any failure
 * of the channel only makes the caller fall back to the docker API.
 */
class WarmContainer {
  readonly container: Docker.Container;
  readonly at: number;
  readonly #io: Duplex;
  /**
   * stdout of the request in flight (nothing is kept between requests: a process in the
   * sandbox that writes to PID 1's stdout only fails its own run's channel), and a little
   * stderr for error messages.
   */
  #out: Buffer[] = [];
  #outBytes = 0;
  #cap = 0;
  #inFlight = false;
  #err = "";
  #ended = false;
  #busy: Promise<unknown> = Promise.resolve();
  readonly #waiters = new Set<() => void>();

  private constructor(container: Docker.Container, io: Duplex, at: number) {
    this.container = container;
    this.at = at;
    this.#io = io;
    demux(io, (name, chunk) => {
      if (name === "stdout") {
        if (!this.#inFlight) return;
        this.#out.push(chunk);
        this.#outBytes += chunk.length;
        // More than the request can answer: the channel is not to be trusted any more.
        if (this.#outBytes > this.#cap) this.close();
      } else if (this.#err.length < 4096) this.#err += chunk.toString("utf8");
      this.#wake();
    });
    const end = (): void => {
      this.#ended = true;
      this.#wake();
    };
    io.on("end", end);
    io.on("close", end);
    io.on("error", end);
  }

  /** Attaches (before the start, so nothing is missed) and starts the container. */
  static async start(container: Docker.Container, at: number): Promise<WarmContainer> {
    const io = (await container.attach({
      stream: true,
      stdin: true,
      stdout: true,
      stderr: true,
      hijack: true,
    })) as unknown as Duplex;
    const w = new WarmContainer(container, io, at);
    try {
      await container.start();
    } catch (err) {
      io.destroy();
      throw err;
    }
    return w;
  }

  alive(): boolean {
    return !this.#ended;
  }

  /** Streams the workspace archive into PID 1 and waits until it is unpacked. */
  async unpack(tar: Uint8Array, timeoutMs = 60_000): Promise<void> {
    await this.#request(
      [Buffer.from(`${tar.byteLength}\n`), Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength)],
      WARM_READY.length,
      (tail) => (tail(WARM_READY.length).toString("latin1") === WARM_READY ? true : undefined),
      timeoutMs,
    );
  }

  /** The workspace as a tar, from PID 1. */
  async exportWorkspace(timeoutMs = 120_000): Promise<Buffer> {
    const nonce = randomUUID();
    const trailer = Buffer.from(`\nagentd-done ${nonce} `, "latin1");
    // The trailer, tar's exit status and the final newline end the answer.
    const window = trailer.length + 8;
    return this.#request(
      [Buffer.from(`export ${nonce}\n`)],
      WARM_MAX_EXPORT_BYTES,
      (tail, all) => {
        const end = tail(window);
        if (end.at(-1) !== 0x0a) return undefined;
        const at = end.lastIndexOf(trailer);
        if (at < 0) return undefined;
        const status = end.subarray(at + trailer.length, end.length - 1).toString("latin1");
        if (status !== "0") throw new Error(`tar in the sandbox exited ${status}: ${this.#err}`);
        const out = all();
        return out.subarray(0, out.length - (end.length - at));
      },
      timeoutMs,
    );
  }

  /** Stops talking to PID 1 (it then sleeps); the container stays. */
  close(): void {
    this.#io.destroy();
  }

  async discard(): Promise<void> {
    this.#io.destroy();
    await this.container.remove({ force: true, v: true }).catch(() => undefined);
  }

  /**
   * Sends `data`, then waits until `done` finds the answer at the end of the stdout received
   * since (`tail(n)`: its last n bytes; `all()`: all of it, concatenated once). More than
   * `cap` bytes of answer fail the request and the channel.
   */
  #request<T>(
    data: Buffer[],
    cap: number,
    done: (tail: (n: number) => Buffer, all: () => Buffer) => T | undefined,
    timeoutMs: number,
  ): Promise<T> {
    const tail = (n: number): Buffer => {
      const parts: Buffer[] = [];
      let got = 0;
      for (let i = this.#out.length - 1; i >= 0 && got < n; i--) {
        const c = this.#out[i] as Buffer;
        parts.unshift(c);
        got += c.length;
      }
      const b = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
      return b.subarray(Math.max(0, b.length - n));
    };
    const all = (): Buffer => Buffer.concat(this.#out, this.#outBytes);
    const run = async (): Promise<T> => {
      this.#out = [];
      this.#outBytes = 0;
      this.#cap = cap;
      this.#err = "";
      this.#inFlight = true;
      try {
        for (const d of data) this.#io.write(d);
        const deadline = Date.now() + timeoutMs;
        let seen = -1;
        for (;;) {
          if (this.#outBytes !== seen) {
            seen = this.#outBytes;
            const answer = done(tail, all);
            if (answer !== undefined) return answer;
          }
          if (this.#ended) throw new Error(`the warm sandbox's channel closed: ${this.#err}`);
          if (Date.now() > deadline) throw new Error("the warm sandbox did not answer in time");
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
            this.#waiters.add(() => {
              clearTimeout(t);
              resolve();
            });
          });
        }
      } finally {
        this.#inFlight = false;
        this.#out = [];
        this.#outBytes = 0;
      }
    };
    const p = this.#busy.then(run, run);
    this.#busy = p.catch(() => undefined);
    return p;
  }

  #wake(): void {
    for (const w of this.#waiters) w();
    this.#waiters.clear();
  }
}

class DockerSandboxHandle implements SandboxHandle {
  readonly id: string;
  readonly runId: string;
  readonly #container: Docker.Container;
  readonly #baseTar: Uint8Array | undefined;
  /** The control channel of a container that started warm (exports without docker cp). */
  #channel: WarmContainer | undefined;
  #oomKills = 0;
  #destroyed = false;

  constructor(
    container: Docker.Container,
    runId: string,
    baseTar: Uint8Array | undefined,
    channel?: WarmContainer,
  ) {
    this.#container = container;
    this.id = container.id;
    this.runId = runId;
    this.#baseTar = baseTar;
    this.#channel = channel;
  }

  async exec(req: ExecRequest): Promise<ExecResult> {
    if (req.argv.length === 0) throw new AgentdError("EVALIDATION", "exec: argv is empty");
    const started = performance.now();
    const execId = randomUUID();
    const withStdin = req.stdin !== undefined;
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
          ...req.argv,
        ],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: withStdin,
        User: SANDBOX_USER,
        WorkingDir: req.cwd ?? WORKSPACE,
        Env: Object.entries(req.env ?? {}).map(([k, v]) => `${k}=${v}`),
      });
      stream = (await exec.start({ hijack: true, stdin: withStdin })) as unknown as Duplex;
    } catch (err) {
      throw dockerError(err, `exec in the sandbox of run ${this.runId}`);
    }

    const out = new OutputCollector(req.maxOutputBytes, req.onOutput);
    let killedFor: "timeout" | "cap" | "cancel" | undefined;
    let killing: Promise<void> | undefined;
    const kill = (why: "timeout" | "cap" | "cancel"): void => {
      if (killedFor !== undefined) return;
      killedFor = why;
      killing = this.#killGroup(execId);
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
      req.signal?.removeEventListener("abort", onAbort);
    }
    await killing;
    const exitCode = await exitCodeOf(exec);
    let oomKilled = false;
    if (exitCode === 137 && killedFor === undefined) oomKilled = await this.#checkOom();
    const { stdout, stderr, truncated } = out.finish();
    return {
      exitCode,
      stdout,
      stderr,
      truncated,
      timedOut: killedFor === "timeout",
      cancelled: killedFor === "cancel",
      oomKilled,
      durationMs: Math.round(performance.now() - started),
    };
  }

  /** Kills an exec's process group; if even that cannot start (pids exhausted), restarts the container. */
  async #killGroup(execId: string): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const { exitCode: r } = await this.#helperExec([
          "sh",
          "-c",
          KILL_SCRIPT,
          "agentd-kill",
          execId,
        ]);
        if (r === 0 || r === 3) return;
      } catch {
        // fall through: retry, then restart
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    // A fork bomb at the pids limit leaves no room for a kill: restarting the container
    // kills every process in it; the workspace volume stays, /tmp is emptied.
    await this.#container.restart({ t: 0 }).catch(() => undefined);
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

  async exportWorkspace(): Promise<Buffer> {
    if (this.#channel?.alive()) {
      try {
        return await this.#channel.exportWorkspace();
      } catch {
        // The channel broke (its PID 1 was killed, a file tar cannot read as the sandbox
        // user): the engine's archive API reads as root.
        this.#channel.close();
        this.#channel = undefined;
      }
    }
    try {
      const stream = await this.#container.getArchive({ path: `${WORKSPACE}/.` });
      const chunks: Buffer[] = [];
      for await (const c of stream) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    } catch (err) {
      throw dockerError(err, `export the workspace of run ${this.runId}`);
    }
  }

  async diff(baseTar?: Uint8Array): Promise<WorkspaceDiff> {
    const base = baseTar ?? this.#baseTar;
    if (base === undefined) {
      throw new AgentdError(
        "EVALIDATION",
        "diff: no initial snapshot known for this sandbox; pass the base archive",
      );
    }
    const [before, after] = await Promise.all([
      base.byteLength === 0 ? [] : readWorkspaceArchive(base, SANDBOX_EXPORT_LIMITS),
      this.exportWorkspace().then((t) => readWorkspaceArchive(t, SANDBOX_EXPORT_LIMITS)),
    ]);
    return diffWorkspaces(before, after);
  }

  detach(): void {
    this.#channel?.close();
    this.#channel = undefined;
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#channel?.close();
    await this.#container.remove({ force: true, v: true }).catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw dockerError(err, `remove the sandbox of run ${this.runId}`);
    });
  }
}

async function exitCodeOf(exec: Docker.Exec): Promise<number> {
  // The stream can end a moment before the engine records the exit code.
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && info.ExitCode !== null) return info.ExitCode;
    await new Promise((r) => setTimeout(r, 10));
  }
  return -1;
}

/** Splits Docker's multiplexed attach stream: 8-byte headers (stream id, size), then payload. */
function demux(stream: Duplex, onChunk: (name: OutputStreamName, chunk: Buffer) => void): void {
  let buf: Buffer = Buffer.alloc(0);
  stream.on("data", (data: Buffer) => {
    buf = buf.length === 0 ? data : Buffer.concat([buf, data]);
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4);
      if (buf.length < 8 + size) break;
      const kind = buf[0];
      const payload = buf.subarray(8, 8 + size);
      buf = buf.subarray(8 + size);
      if (kind === 1) onChunk("stdout", payload);
      else if (kind === 2) onChunk("stderr", payload);
    }
  });
}

/** Keeps at most `max` bytes of output in total; decodes UTF-8 safely across chunks. */
class OutputCollector {
  readonly #max: number;
  readonly #onOutput: ExecRequest["onOutput"];
  readonly #text = { stdout: "", stderr: "" };
  readonly #dec = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
  #bytes = 0;
  #truncated = false;

  constructor(max: number, onOutput: ExecRequest["onOutput"]) {
    this.#max = max;
    this.#onOutput = onOutput;
  }

  /** Adds a chunk; false once the cap is reached (the caller stops the process). */
  push(name: OutputStreamName, chunk: Buffer): boolean {
    if (this.#truncated) return false;
    const room = this.#max - this.#bytes;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.#bytes += part.length;
    const text = this.#dec[name].write(part);
    if (text !== "") {
      this.#text[name] += text;
      this.#onOutput?.(name, text);
    }
    if (chunk.length > room) {
      this.#truncated = true;
      const marker = `\n[agentd: output truncated at ${this.#max} bytes; the process was stopped]\n`;
      this.#text[name] += this.#dec[name].end() + marker;
      this.#onOutput?.(name, marker);
      return false;
    }
    return true;
  }

  finish(): { stdout: string; stderr: string; truncated: boolean } {
    if (!this.#truncated) {
      this.#text.stdout += this.#dec.stdout.end();
      this.#text.stderr += this.#dec.stderr.end();
    }
    return { ...this.#text, truncated: this.#truncated };
  }
}

/** Docker failures as typed errors: a missing image is ENOTFOUND, an unreachable engine EUNAVAILABLE. */
export function dockerError(err: unknown, doing: string, image?: string): AgentdError {
  const e = err as { statusCode?: number; message?: string; code?: string };
  if (e.statusCode === 404 && image !== undefined && /image/i.test(e.message ?? "")) {
    return new AgentdError(
      "ENOTFOUND",
      `unknown sandbox image ${image}: build it with 'make images' or set sandbox.image`,
      {
        cause: err,
      },
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
