/**
 * The Sandbox port on the Docker engine (dockerode). One hardened container per run:
 * non-root user 1000, every capability dropped, no-new-privileges, read-only root with a
 * writable /workspace volume and a tmpfs /tmp, memory/CPU/pids limits, no network unless
 * asked, an init that reaps zombies, labels agentd.run-id / agentd.tenant.
 *
 * Must never: bind-mount a host path, mount the Docker socket, run anything privileged,
 * or leave a process running past its timeout.
 */
import { randomUUID } from "node:crypto";
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
  SandboxSpec,
  WorkspaceDiff,
} from "./port.ts";
import { WORKSPACE } from "./port.ts";
import { packWorkspace, readWorkspaceArchive } from "./workspace-archive.ts";
import { diffWorkspaces } from "./workspace-diff.ts";

export const LABEL_RUN = "agentd.run-id";
export const LABEL_TENANT = "agentd.tenant";
export const LABEL_MANAGED = "agentd.managed";

export interface DockerSandboxOptions {
  docker: Docker;
  /**
   * Value of the agentd.managed label on containers this instance makes and reaps.
   * Default "true"; tests use a unique value so they never touch each other's containers.
   */
  managedLabel?: string;
}

const SANDBOX_USER = "1000:1000";
/** PID 1 of every sandbox: sleeps until the container is removed. */
const IDLE_CMD = ["sleep", "2147483647"];

export function createDockerSandbox(opts: DockerSandboxOptions): Sandbox {
  const docker = opts.docker;
  const managed = opts.managedLabel ?? "true";

  const handleFor = (
    container: Docker.Container,
    runId: string,
    baseTar: Uint8Array | undefined,
  ): SandboxHandle => new DockerSandboxHandle(container, runId, baseTar);

  return {
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      const env = Object.entries({ HOME: "/tmp", ...spec.env }).map(([k, v]) => `${k}=${v}`);
      let container: Docker.Container;
      try {
        container = await docker.createContainer({
          Image: spec.image,
          Cmd: IDLE_CMD,
          User: SANDBOX_USER,
          WorkingDir: WORKSPACE,
          Env: env,
          Labels: {
            [LABEL_RUN]: spec.runId,
            [LABEL_TENANT]: spec.tenantId,
            [LABEL_MANAGED]: managed,
          },
          NetworkDisabled: spec.network === "none",
          Volumes: { [WORKSPACE]: {} },
          HostConfig: {
            NetworkMode: spec.network === "none" ? "none" : "bridge",
            CapDrop: ["ALL"],
            SecurityOpt: ["no-new-privileges"],
            ReadonlyRootfs: true,
            Tmpfs: { "/tmp": `rw,nosuid,nodev,size=${Math.floor(spec.limits.tmpBytes)},mode=1777` },
            Memory: Math.floor(spec.limits.memoryBytes),
            MemorySwap: Math.floor(spec.limits.memoryBytes),
            NanoCpus: Math.floor(spec.limits.cpus * 1e9),
            PidsLimit: spec.limits.pids,
            Init: true,
            Privileged: false,
            IpcMode: "private",
          },
        });
      } catch (err) {
        throw dockerError(err, `create the sandbox of run ${spec.runId}`, spec.image);
      }
      try {
        if (spec.workspaceTar !== undefined && spec.workspaceTar.byteLength > 0) {
          // The workspace volume exists from create on; docker extracts into it (a volume
          // is writable even with a read-only root). Paths were validated before.
          await container.putArchive(Buffer.from(spec.workspaceTar), { path: WORKSPACE });
        }
        await container.start();
      } catch (err) {
        await container.remove({ force: true, v: true }).catch(() => undefined);
        throw dockerError(err, `start the sandbox of run ${spec.runId}`, spec.image);
      }
      return handleFor(container, spec.runId, spec.workspaceTar ?? (await packWorkspace([])));
    },

    async find(runId: string): Promise<SandboxHandle | undefined> {
      const list = await docker.listContainers({
        filters: { label: [`${LABEL_RUN}=${runId}`, `${LABEL_MANAGED}=${managed}`] },
      });
      const c = list[0];
      return c === undefined ? undefined : handleFor(docker.getContainer(c.Id), runId, undefined);
    },

    async reap(isLive): Promise<string[]> {
      const list = await docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_MANAGED}=${managed}`] },
      });
      const reaped: string[] = [];
      for (const c of list) {
        const runId = c.Labels[LABEL_RUN];
        if (runId === undefined || (await isLive(runId))) continue;
        await docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .then(() => reaped.push(runId))
          .catch((err: { statusCode?: number }) => {
            if (err.statusCode !== 404)
              throw dockerError(err, `remove the sandbox of run ${runId}`);
          });
      }
      return reaped;
    },
  };
}

class DockerSandboxHandle implements SandboxHandle {
  readonly id: string;
  readonly runId: string;
  readonly #container: Docker.Container;
  readonly #baseTar: Uint8Array | undefined;
  #oomKills = 0;
  #destroyed = false;

  constructor(container: Docker.Container, runId: string, baseTar: Uint8Array | undefined) {
    this.#container = container;
    this.id = container.id;
    this.runId = runId;
    this.#baseTar = baseTar;
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
    const unlimited = {
      maxArchiveBytes: Number.MAX_SAFE_INTEGER,
      maxContentBytes: 4 * 1024 ** 3,
      maxEntries: 10_000_000,
      lenient: true,
    };
    const [before, after] = await Promise.all([
      base.byteLength === 0 ? [] : readWorkspaceArchive(base, unlimited),
      this.exportWorkspace().then((t) => readWorkspaceArchive(t, unlimited)),
    ]);
    return diffWorkspaces(before, after);
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
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
