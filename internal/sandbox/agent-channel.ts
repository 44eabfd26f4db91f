/**
 * The channel to a sandbox's agent (sandbox-images/agent): the attached stdin/stdout of
 * the container's main process, carrying multiplexed frames (agent-protocol.ts). Tool
 * processes start, stream their output and end through it in about a millisecond, with no
 * Docker engine call; the workspace goes in (tar -x fed from agentd) and comes out (tar
 * -c streamed back) through the same calls.
 *
 * The agent runs as another user than every sandbox process: what sandbox code prints
 * reaches agentd only as the payload of its own call's frames. A channel that ends or
 * breaks the protocol fails every call in flight; the handle then treats the container as
 * lost (docker-handle.ts). Must never: resolve a call from anything but its own exit frame,
 * or buffer without bound (export output is paced by its consumer).
 */
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import {
  type Exit,
  FLAG,
  FrameReader,
  frame,
  parseExit,
  type StartOptions,
  startFrame,
} from "./agent-protocol.ts";
import { attachThenStart, ChunkQueue, demux } from "./docker-stream.ts";
import { EXPORT_SCRIPT } from "./exec-scripts.ts";
import { type OutputStreamName, WORKSPACE, type WorkspaceSource } from "./port.ts";

/** How long the agent may take to say hello after the container started. */
const HELLO_TIMEOUT_MS = 10_000;
/** A kill-all answered later than this means the agent is stuck: the channel is failed. */
const KILL_ALL_TIMEOUT_MS = 10_000;
/**
 * stdin bytes in flight per call before the agent's credit ('C' frames): the agent never
 * blocks on a process that does not read its stdin, so no call holds up another's frames.
 * The agent refuses more (agent.c STDIN_WINDOW).
 */
const STDIN_WINDOW = 256 * 1024;
const STDIN_FRAME = 64 * 1024;

export interface AgentCall {
  /** The exit frame; rejects when the channel is lost first. */
  readonly done: Promise<Exit>;
  /** Kills the call's process group (idempotent; nothing after the exit). */
  kill(): void;
  /** Streams bytes to the call's stdin (started with stdin: true), paced by the pipe. */
  write(data: Uint8Array): Promise<void>;
  endStdin(): void;
}

interface Pending {
  onOutput: (name: OutputStreamName, chunk: Buffer) => void;
  resolve: (e: Exit) => void;
  reject: (err: Error) => void;
  /** stdin bytes sent and not yet credited by the agent. */
  unacked: number;
  /** Wakes a writer waiting for credit. */
  credited?: () => void;
}

/**
 * What carries an agent's frames: a container's attached stdio (Docker's multiplexed
 * stream, a Pod's attach WebSocket: kubernetes/attach-link.ts).
 */
export interface AgentLink<C> {
  /** The container (or Pod) the agent runs in. */
  readonly container: C;
  /** Writes reach the agent's stdin; its stdout is read (pause/resume pace it). */
  readonly io: Duplex;
  /** Hands each piece of the agent's stdout and stderr to `f`, in order. */
  split(io: Duplex, f: (name: OutputStreamName, chunk: Buffer) => void): void;
  /** Removes the container (discard). */
  remove(): Promise<void>;
}

/** Docker's link: the hijacked attach or exec stream, demultiplexed. */
function dockerLink(container: Docker.Container, io: Duplex): AgentLink<Docker.Container> {
  return {
    container,
    io,
    split: demux,
    remove: () => container.remove({ force: true, v: true }),
  };
}

export class AgentChannel<C = Docker.Container> {
  readonly container: C;
  /** When the container was started (ms since epoch). */
  readonly at: number;
  readonly #io: Duplex;
  readonly #reader = new FrameReader();
  readonly #calls = new Map<number, Pending>();
  #nextId = 1;
  #err = "";
  #lost: string | undefined;
  readonly #hello: Promise<void>;
  /** The agent's protocol version, from its hello (1 until then). */
  #version = 1;
  #helloSeen!: () => void;
  readonly #onEnd = new Set<(why: string) => void>();
  /**
   * The environment of agentd's own calls (the workspace in and out, the OOM counter):
   * empty for an image's own agent (its sh and tar), PATH=/.agentd/bin for an injected one
   * (agent-bundle.ts: busybox's, so they work in an image without a shell or tar).
   */
  readonly ownEnv: Readonly<Record<string, string>>;

  readonly #remove: () => Promise<void>;

  private constructor(
    link: AgentLink<C>,
    at: number,
    ownEnv: Readonly<Record<string, string>> = {},
  ) {
    const io = link.io;
    this.container = link.container;
    this.#remove = link.remove;
    this.at = at;
    this.ownEnv = ownEnv;
    this.#io = io;
    this.#hello = new Promise<void>((resolve) => {
      this.#helloSeen = resolve;
    });
    this.#hello.catch(() => undefined);
    link.split(io, (name, chunk) => {
      if (name === "stderr") {
        if (this.#err.length < 4096) this.#err += chunk.toString("utf8");
        return;
      }
      try {
        this.#reader.push(chunk, (f) => this.#dispatch(f.type, f.id, f.payload));
      } catch (err) {
        this.#fail(`the agent broke the protocol: ${(err as Error).message}`);
      }
    });
    const end = (): void => this.#fail("the agent's channel closed");
    io.on("end", end);
    io.on("close", end);
    io.on("error", end);
  }

  /** Attaches (before the start, so nothing is missed) and starts the container. */
  static start(
    container: Docker.Container,
    at: number,
    ownEnv?: Readonly<Record<string, string>>,
  ): Promise<AgentChannel<Docker.Container>> {
    return attachThenStart(
      container,
      (io) => new AgentChannel(dockerLink(container, io), at, ownEnv),
    );
  }

  /** The agent at the other end of `link`, already running (it says hello first). */
  static over<C>(
    link: AgentLink<C>,
    at: number,
    ownEnv?: Readonly<Record<string, string>>,
  ): AgentChannel<C> {
    return new AgentChannel(link, at, ownEnv);
  }

  /**
   * A second agent in a running container (one found again, whose first agent was another
   * process's), through one `docker exec` as root with the container's two capabilities.
   * It exits when its pipe closes (--exit-on-eof), instead of idling as the first does.
   */
  static async exec(
    container: Docker.Container,
    path: string,
    at: number,
    ownEnv?: Readonly<Record<string, string>>,
  ): Promise<AgentChannel<Docker.Container>> {
    const exec = await container.exec({
      Cmd: [path, "--exit-on-eof"],
      User: "0:0",
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
    });
    const io = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
    return new AgentChannel(dockerLink(container, io), at, ownEnv);
  }

  alive(): boolean {
    return this.#lost === undefined;
  }

  /** Why the channel failed (undefined while it works). */
  get lost(): string | undefined {
    return this.#lost;
  }

  /** Resolves once the agent said hello; fails after a timeout or when the channel ends. */
  ready(timeoutMs = HELLO_TIMEOUT_MS): Promise<void> {
    return this.#within(this.#hello, timeoutMs, "the sandbox agent did not start");
  }

  /** Starts a process. Output arrives through `onOutput`, already split by stream. */
  call(o: StartOptions, onOutput: Pending["onOutput"]): AgentCall {
    const id = this.#id();
    const start = startFrame(id, o); // throws on what the agent cannot take: nothing is pending yet
    let pending!: Pending;
    const done = new Promise<Exit>((resolve, reject) => {
      pending = { onOutput, resolve, reject, unacked: 0 };
      this.#calls.set(id, pending);
    });
    done.catch(() => undefined);
    let ended = false;
    done.then(
      () => {
        ended = true;
      },
      () => {
        ended = true;
      },
    );
    if (this.#lost !== undefined) this.#calls.get(id)?.reject(this.#lostError());
    else this.#send(start);
    return {
      done,
      kill: () => {
        if (!ended) this.#send(frame("K", id));
      },
      write: async (data) => {
        for (let at = 0; at < data.byteLength; at += STDIN_FRAME) {
          const part = data.subarray(at, at + STDIN_FRAME);
          while (!ended && pending.unacked + part.byteLength > STDIN_WINDOW)
            await new Promise<void>((wake) => {
              pending.credited = wake;
            });
          if (ended) return;
          pending.unacked += part.byteLength;
          await this.#write(frame("I", id, part));
        }
      },
      endStdin: () => {
        if (!ended) this.#send(frame("E", id));
      },
    };
  }

  /** Kills every process of the sandbox user; resolves once a scan found none left. */
  async killAll(): Promise<void> {
    const id = this.#id();
    const done = new Promise<Exit>((resolve, reject) => {
      this.#calls.set(id, { onOutput: () => undefined, resolve, reject, unacked: 0 });
    });
    this.#send(frame("A", id));
    const exit = await this.#within(done, KILL_ALL_TIMEOUT_MS, "the sandbox agent did not kill");
    // A newer agent owns the container (agent.c owns_container): another worker took the
    // run over, and what runs there is its own — fenced, as any write of a stale owner is.
    if (exit.code === 2)
      throw new AgentdError(
        "EFENCED",
        "another worker owns this run's sandbox now (a newer agent runs there): nothing was killed",
      );
    if (exit.code !== 0)
      throw new AgentdError("EIO", "the sandbox agent could not stop every process");
  }

  /** Whether the agent keeps agentd's marks (protocol 2: the `M` frame). */
  get marks(): boolean {
    return this.#version >= 2;
  }

  /**
   * One of agentd's marks, kept by the agent (root) in its directory of root's: true when
   * done (test: the mark is there). Throws when the agent cannot (its directory is not
   * root's alone, a bad name).
   */
  async mark(name: string, op: "set" | "clear" | "test"): Promise<boolean> {
    const id = this.#id();
    const done = new Promise<Exit>((resolve, reject) => {
      this.#calls.set(id, { onOutput: () => undefined, resolve, reject, unacked: 0 });
    });
    const code = { set: 0, clear: 1, test: 2 }[op];
    this.#send(frame("M", id, Buffer.concat([Buffer.from([code]), Buffer.from(name, "latin1")])));
    const exit = await this.#within(done, KILL_ALL_TIMEOUT_MS, "the sandbox agent did not answer");
    if (exit.code === 0) return true;
    if (exit.code === 1 && op === "test") return false;
    throw new AgentdError(
      "EIO",
      `the sandbox agent cannot ${op} agentd's mark "${name}" (/tmp/.agentd-root is not root's alone)`,
    );
  }

  /** Streams the workspace archive into `tar -x` and waits until it is unpacked. */
  async unpack(source: WorkspaceSource, timeoutMs = 120_000): Promise<void> {
    await this.ready();
    let stderr = "";
    const c = this.call(
      {
        argv: ["tar", "-x", "-p", "-f", "-", "-C", WORKSPACE],
        cwd: WORKSPACE,
        env: { ...this.ownEnv },
        timeoutMs,
        maxOutputBytes: 64 * 1024,
        stdin: true,
        private: true,
      },
      (name, chunk) => {
        if (name === "stderr" && stderr.length < 4096) stderr += chunk.toString("utf8");
      },
    );
    let sent = 0;
    try {
      for await (const part of source.open()) {
        sent += part.byteLength;
        await c.write(part);
      }
    } finally {
      c.endStdin();
    }
    // The agent times tar out itself; this is for an agent that stopped answering.
    const exit = await this.#within(c.done, timeoutMs + 5_000, "the sandbox agent did not unpack");
    if (sent !== source.size)
      throw new AgentdError("EIO", `the workspace archive was ${sent} bytes, not ${source.size}`);
    if (exit.code !== 0 || (exit.flags & ~FLAG.clean) !== 0)
      throw new AgentdError(
        "EIO",
        `tar in the sandbox exited ${exit.code}: ${(exit.message || stderr).trim().slice(0, 500)}`,
      );
  }

  /** The workspace as a tar, streamed with backpressure (the agent's pipe is paused). */
  async *exportWorkspace(timeoutMs = 300_000): AsyncGenerator<Uint8Array> {
    const queue = new ChunkQueue(
      () => this.#io.pause(),
      () => this.#io.resume(),
    );
    let stderr = "";
    let stopped = false;
    const c = this.call(
      {
        argv: ["sh", "-c", EXPORT_SCRIPT],
        cwd: WORKSPACE,
        env: { ...this.ownEnv },
        timeoutMs,
        maxOutputBytes: 0xffffffff,
        stdin: false,
        private: true,
      },
      (name, chunk) => {
        if (stopped) return; // the consumer went: the rest is dropped, never queued
        if (name === "stdout") queue.push(chunk);
        else if (stderr.length < 4096) stderr += chunk.toString("utf8");
      },
    );
    c.done.then(
      (exit) =>
        queue.end(
          exit.code === 0
            ? undefined
            : new AgentdError(
                "EIO",
                `tar in the sandbox exited ${exit.code}: ${(exit.message || stderr).trim().slice(0, 500)}`,
              ),
        ),
      (err: Error) => queue.end(err),
    );
    // The agent times tar out itself; this is for an agent that stopped answering.
    const deadline = setTimeout(() => {
      queue.end(new AgentdError("EIO", "the sandbox agent did not finish the export"));
      this.#fail(`the export did not end within ${timeoutMs + 5_000} ms`);
    }, timeoutMs + 5_000);
    let finished = false;
    try {
      yield* queue.drain();
      finished = true;
    } finally {
      clearTimeout(deadline);
      stopped = true;
      this.#io.resume();
      if (!finished) c.kill();
    }
  }

  /** Stops talking to the agent (it kills what runs and idles); the container stays. */
  close(): void {
    this.#io.destroy();
  }

  async discard(): Promise<void> {
    this.#io.destroy();
    await this.#remove().catch(() => undefined);
  }

  /** Called with the reason when the channel fails (once). */
  onLost(f: (why: string) => void): () => void {
    this.#onEnd.add(f);
    return () => this.#onEnd.delete(f);
  }

  #dispatch(type: string, id: number, payload: Buffer): void {
    if (type === "H") {
      // "agentd-agent VERSION PID": version 2 keeps agentd's marks (mark()).
      this.#version = Number(/^agentd-agent (\d+) /.exec(payload.toString("latin1"))?.[1] ?? 1);
      this.#helloSeen();
      return;
    }
    const p = this.#calls.get(id);
    if (p === undefined) return; // a call that already ended: late output
    if (type === "O") p.onOutput("stdout", payload);
    else if (type === "R") p.onOutput("stderr", payload);
    else if (type === "C" && payload.length === 4) {
      p.unacked = Math.max(0, p.unacked - payload.readUInt32BE(0));
      this.#wake(p);
    } else if (type === "X" || type === "a") {
      this.#calls.delete(id);
      p.resolve(
        type === "X" ? parseExit(payload) : { code: payload[0] ?? 1, flags: 0, message: "" },
      );
      this.#wake(p);
    }
  }

  #fail(why: string): void {
    if (this.#lost !== undefined) return;
    this.#lost = this.#err.trim() === "" ? why : `${why}: ${this.#err.trim().slice(0, 500)}`;
    this.#io.destroy();
    const err = this.#lostError();
    for (const p of this.#calls.values()) {
      p.reject(err);
      this.#wake(p);
    }
    this.#calls.clear();
    for (const f of this.#onEnd) f(this.#lost);
    this.#onEnd.clear();
  }

  #wake(p: Pending): void {
    const w = p.credited;
    p.credited = undefined;
    w?.();
  }

  #lostError(): AgentdError {
    return new AgentdError("EIO", `the sandbox agent is gone (${this.#lost})`);
  }

  #id(): number {
    const id = this.#nextId;
    this.#nextId = id >= 0xffffffff ? 1 : id + 1;
    return id;
  }

  #send(data: Buffer): void {
    if (this.#lost === undefined) this.#io.write(data);
  }

  #write(data: Buffer): Promise<void> {
    if (this.#lost !== undefined) return Promise.reject(this.#lostError());
    return new Promise<void>((resolve, reject) => {
      const onEnd = (): void => reject(this.#lostError());
      this.#onEnd.add(onEnd);
      const ok = this.#io.write(data, (err) => (err ? reject(err) : undefined));
      const done = (): void => {
        this.#onEnd.delete(onEnd);
        resolve();
      };
      if (ok) done();
      else this.#io.once("drain", done);
    });
  }

  #within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    if (this.#lost !== undefined) return Promise.reject(this.#lostError());
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new AgentdError("EIO", `${what} within ${ms} ms`));
        this.#fail(`${what} within ${ms} ms`);
      }, ms);
      const lost = this.onLost((why) => {
        clearTimeout(timer);
        reject(new AgentdError("EIO", `${what}: ${why}`));
      });
      p.then(
        (v) => {
          clearTimeout(timer);
          lost();
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          lost();
          reject(err);
        },
      );
    });
  }
}
