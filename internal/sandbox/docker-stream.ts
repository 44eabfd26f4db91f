/**
 * Docker's attach/exec stream plumbing: the multiplexed frame format, a capped UTF-8
 * output collector, an exec's exit code, and a byte-capped pull iterator over a stream.
 * Must never: buffer an unbounded amount of a sandbox's output.
 */
import type { Duplex } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type Docker from "dockerode";
import { AgentdError } from "../errors.ts";
import type { ExecRequest, OutputStreamName } from "./port.ts";

/**
 * Splits Docker's multiplexed attach stream: 8-byte headers (stream id, size), then payload.
 * Payload is handed on as it arrives, in as many pieces as the socket delivered it: nothing
 * is copied but a header split across two reads (a workspace export is gigabytes of frames;
 * gathering each frame would allocate and discard as much again).
 */
export function demux(
  stream: Duplex,
  onChunk: (name: OutputStreamName, chunk: Buffer) => void,
): void {
  let header: Buffer = Buffer.alloc(0);
  let left = 0; // payload bytes of the current frame still to come
  let kind = 0;
  stream.on("data", (data: Buffer) => {
    let at = 0;
    while (at < data.length) {
      if (left === 0) {
        const need = 8 - header.length;
        const take = data.subarray(at, at + need);
        header = header.length === 0 ? take : Buffer.concat([header, take]);
        at += take.length;
        if (header.length < 8) return;
        kind = header[0] as number;
        left = header.readUInt32BE(4);
        header = Buffer.alloc(0);
        continue;
      }
      const piece = data.subarray(at, at + left);
      at += piece.length;
      left -= piece.length;
      if (kind === 1) onChunk("stdout", piece);
      else if (kind === 2) onChunk("stderr", piece);
    }
  });
}

/** The exit code of a finished exec (-1 when the engine never records one). */
export async function exitCodeOf(exec: Docker.Exec): Promise<number> {
  // The stream can end a moment before the engine records the exit code.
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && info.ExitCode !== null) return info.ExitCode;
    await new Promise((r) => setTimeout(r, 10));
  }
  return -1;
}

/** Keeps at most `max` bytes of output in total; decodes UTF-8 safely across chunks. */
export class OutputCollector {
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

/**
 * A pull-based queue between a push source (stream events) and an async iterator: the
 * producer pauses the source while `highWater` bytes wait unread, so a slow consumer never
 * makes the worker buffer a whole workspace.
 */
export class ChunkQueue {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #done = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  readonly #pause: () => void;
  readonly #resume: () => void;
  readonly #highWater: number;

  constructor(pause: () => void, resume: () => void, highWater = 1024 * 1024) {
    this.#pause = pause;
    this.#resume = resume;
    this.#highWater = highWater;
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    if (this.#bytes >= this.#highWater) this.#pause();
    this.#signal();
  }

  end(error?: Error): void {
    if (this.#done) return;
    this.#done = true;
    this.#error = error;
    this.#signal();
  }

  async *drain(): AsyncGenerator<Buffer> {
    for (;;) {
      const chunk = this.#chunks.shift();
      if (chunk !== undefined) {
        this.#bytes -= chunk.length;
        if (this.#bytes < this.#highWater / 2) this.#resume();
        yield chunk;
        continue;
      }
      if (this.#done) {
        if (this.#error !== undefined) throw this.#error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  #signal(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}

/** `source` with a cap: more than `max` bytes fail with ETOOLARGE naming `what`. */
export async function* capped(
  source: AsyncIterable<Uint8Array>,
  max: number,
  what: string,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  for await (const chunk of source) {
    seen += chunk.byteLength;
    if (seen > max)
      throw new AgentdError("ETOOLARGE", `${what} is larger than ${max} bytes`, {
        field: "sandbox.workspaceSize",
      });
    yield chunk;
  }
}

/**
 * Attaches to a created container's stdin, stdout and stderr, lets `wrap` take the stream
 * (its listeners in place before the start, so nothing is missed), then starts it.
 */
export async function attachThenStart<T>(
  container: Docker.Container,
  wrap: (io: Duplex) => T,
): Promise<T> {
  const io = (await container.attach({
    stream: true,
    stdin: true,
    stdout: true,
    stderr: true,
    hijack: true,
  })) as unknown as Duplex;
  const channel = wrap(io);
  try {
    await container.start();
  } catch (err) {
    io.destroy();
    throw err;
  }
  return channel;
}
