/**
 * The control channel of a sandbox: the attached stdin/stdout of its main process (the
 * CONTROL_LOOP of exec-scripts.ts). The workspace goes in and comes out through this pipe
 * in a few milliseconds, streamed both ways with backpressure (never held whole in memory).
 *
 * stdout arriving outside a request is dropped, and an answer larger than its cap fails
 * the channel, so a sandbox process writing into its main process's pipe (it can: same
 * uid) only spoils its own run's channel. Any failure of the channel makes the caller fall
 * back to `docker exec`. Must never: trust anything on this pipe beyond the run it serves.
 */
import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import { attachThenStart, ChunkQueue, demux } from "./docker-stream.ts";
import type { WorkspaceSource } from "./port.ts";

const READY = "agentd-ready\n";

export class ControlChannel {
  readonly container: Docker.Container;
  /** When the container was started (ms since epoch). */
  readonly at: number;
  readonly #io: Duplex;
  /** Where stdout goes while a request is in flight; dropped otherwise. */
  #sink: ((chunk: Buffer) => void) | undefined;
  #err = "";
  #ended = false;
  #busy: Promise<unknown> = Promise.resolve();
  readonly #onEnd = new Set<() => void>();

  private constructor(container: Docker.Container, io: Duplex, at: number) {
    this.container = container;
    this.at = at;
    this.#io = io;
    demux(io, (name, chunk) => {
      if (name === "stdout") this.#sink?.(chunk);
      else if (this.#err.length < 4096) this.#err += chunk.toString("utf8");
    });
    const end = (): void => {
      this.#ended = true;
      for (const f of this.#onEnd) f();
    };
    io.on("end", end);
    io.on("close", end);
    io.on("error", end);
  }

  /** Attaches (before the start, so nothing is missed) and starts the container. */
  static start(container: Docker.Container, at: number): Promise<ControlChannel> {
    return attachThenStart(container, (io) => new ControlChannel(container, io, at));
  }

  alive(): boolean {
    return !this.#ended;
  }

  /** Streams the workspace archive into the main process and waits until it is unpacked. */
  unpack(source: WorkspaceSource, timeoutMs = 120_000): Promise<void> {
    return this.#exclusive(async () => {
      let seen = "";
      const ready = this.#until(timeoutMs, (chunk, done) => {
        seen = (seen + chunk.toString("latin1")).slice(-READY.length);
        if (seen === READY) done();
      });
      ready.catch(() => undefined); // awaited below; a failed write closes the channel first
      try {
        await this.#write(Buffer.from(`${source.size}\n`));
        let sent = 0;
        for await (const part of source.open()) {
          sent += part.byteLength;
          await this.#write(part);
        }
        if (sent !== source.size)
          throw new AgentdError(
            "EIO",
            `the workspace archive was ${sent} bytes, not ${source.size}`,
          );
      } catch (err) {
        this.close();
        throw err;
      }
      await ready;
    });
  }

  /**
   * The workspace as a tar, streamed. The answer ends with a trailer naming a fresh nonce
   * and tar's status: the last bytes are held back until the trailer is recognised.
   */
  async *exportWorkspace(timeoutMs = 300_000): AsyncGenerator<Uint8Array> {
    let release!: () => void;
    const turn = this.#busy;
    this.#busy = new Promise<void>((r) => {
      release = r;
    });
    await turn.catch(() => undefined);
    try {
      yield* this.#exportStream(timeoutMs);
    } finally {
      this.#sink = undefined;
      release();
    }
  }

  async *#exportStream(timeoutMs: number): AsyncGenerator<Uint8Array> {
    const nonce = randomUUID();
    const trailer = Buffer.from(`\nagentd-done ${nonce} `, "latin1");
    const window = trailer.length + 8;
    const queue = new ChunkQueue(
      () => this.#io.pause(),
      () => this.#io.resume(),
    );
    this.#sink = (chunk) => queue.push(chunk);
    const onEnd = (): void => queue.end(new Error(`the control channel closed: ${this.#err}`));
    this.#onEnd.add(onEnd);
    const timer = setTimeout(() => {
      queue.end(new Error("the sandbox did not finish its export in time"));
      this.close();
    }, timeoutMs);
    let finished = false;
    try {
      await this.#write(Buffer.from(`export ${nonce}\n`));
      // The last `window` bytes are held back until the trailer is ruled out. Chunks pass
      // through as views; bytes are copied only when a chunk ends a line (the trailer does).
      let tail: Buffer = Buffer.alloc(0);
      for await (const chunk of queue.drain()) {
        if (chunk.at(-1) === 0x0a) {
          const held = Buffer.concat([tail, chunk]);
          const at = held.lastIndexOf(trailer);
          if (at >= 0 && held.length - at <= window) {
            const status = held.subarray(at + trailer.length, held.length - 1).toString("latin1");
            if (status !== "0")
              throw new Error(`tar in the sandbox exited ${status}: ${this.#err}`);
            if (at > 0) yield held.subarray(0, at);
            finished = true;
            return;
          }
        }
        if (chunk.length >= window) {
          if (tail.length > 0) yield tail;
          yield chunk.subarray(0, chunk.length - window);
          tail = chunk.subarray(chunk.length - window);
        } else {
          const held = Buffer.concat([tail, chunk]);
          if (held.length > window) yield held.subarray(0, held.length - window);
          tail = held.length > window ? held.subarray(held.length - window) : held;
        }
      }
      throw new Error(`the control channel ended the export early: ${this.#err}`);
    } finally {
      clearTimeout(timer);
      this.#onEnd.delete(onEnd);
      this.#io.resume();
      // A consumer that stopped reading mid-answer leaves the rest of the tar in the pipe:
      // the channel cannot be trusted to frame the next answer.
      if (!finished) this.close();
    }
  }

  /** Stops talking to the main process (it then sleeps); the container stays. */
  close(): void {
    this.#io.destroy();
  }

  async discard(): Promise<void> {
    this.#io.destroy();
    await this.container.remove({ force: true, v: true }).catch(() => undefined);
  }

  /** Runs `fn` when no other request is in flight. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#busy.then(fn, fn);
    this.#busy = p.catch(() => undefined);
    return p;
  }

  #write(data: Uint8Array): Promise<void> {
    if (this.#ended) return Promise.reject(new Error(`the control channel closed: ${this.#err}`));
    return new Promise<void>((resolve, reject) => {
      const ok = this.#io.write(data, (err) => (err ? reject(err) : undefined));
      if (ok) resolve();
      else this.#io.once("drain", resolve);
    });
  }

  /** Resolves when `onChunk` calls done; fails on timeout or when the channel closes. */
  #until(timeoutMs: number, onChunk: (chunk: Buffer, done: () => void) => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const finish = (err?: Error): void => {
        clearTimeout(timer);
        this.#onEnd.delete(onEnd);
        this.#sink = undefined;
        if (err) reject(err);
        else resolve();
      };
      const onEnd = (): void => finish(new Error(`the control channel closed: ${this.#err}`));
      const timer = setTimeout(
        () => finish(new Error("the sandbox did not answer in time")),
        timeoutMs,
      );
      this.#onEnd.add(onEnd);
      if (this.#ended) return onEnd();
      this.#sink = (chunk) => onChunk(chunk, () => finish());
    });
  }
}
