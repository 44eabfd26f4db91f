/**
 * The frames between agentd and the in-container agent (sandbox-images/agent/PROTOCOL.md):
 * a type byte, a call id (u32, big-endian) and a payload length (u32), then the payload.
 * This module only encodes and decodes; agent-channel.ts drives the conversation.
 *
 * Must never: accept a frame longer than its limit (a broken or hostile peer would make
 * agentd buffer without end), or build a start frame the agent would split differently
 * than meant (a NUL inside a string).
 */
import { AgentdError } from "../errors.ts";

export const HEADER_BYTES = 9;
/** The largest payload agentd sends (the agent refuses more). */
export const MAX_SEND = 1 << 20;
/** The largest payload accepted from the agent (it sends output in 64 KiB pieces). */
export const MAX_RECEIVE = 256 * 1024;

/** Exit flags ('X' frames). */
export const FLAG = { timeout: 1, capped: 2, failed: 4, killed: 8, clean: 16 } as const;

export interface Frame {
  type: string;
  id: number;
  payload: Buffer;
}

export function frame(type: string, id: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  if (payload.byteLength > MAX_SEND)
    throw new AgentdError("ETOOLARGE", `an agent frame of ${payload.byteLength} bytes`);
  const head = Buffer.alloc(HEADER_BYTES);
  head.write(type, 0, "latin1");
  head.writeUInt32BE(id >>> 0, 1);
  head.writeUInt32BE(payload.byteLength, 5);
  return payload.byteLength === 0 ? head : Buffer.concat([head, payload]);
}

export interface StartOptions {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  maxOutputBytes: number;
  stdin: boolean;
  /** The cwd's physical path must be this or below it (ExecRequest.cwdWithin). */
  cwdWithin?: string;
  /**
   * agentd's own call (workspace in and out, the OOM counter): its pipes are root's, so
   * no sandbox process can reopen them through /proc to write into its output.
   */
  private?: boolean;
  /** ExecRequest.listHomes: the agent appends the entries of the calls' HOME directory to argv. */
  homes?: boolean;
}

/**
 * 'S': u32 timeout ms, u32 max output, u8 flags (1 stdin, 2 cwd confined, 4 private, 8 list the
 * HOMEs), u16 argc, u16 envc, then NUL-ended strings: cwd, the confining root (flag 2 only), argv, env.
 */
export function startFrame(id: number, o: StartOptions): Buffer {
  const env = Object.entries(o.env).map(([k, v]) => {
    if (k === "" || k.includes("="))
      throw new AgentdError("EVALIDATION", `exec: environment name ${JSON.stringify(k)}`);
    return `${k}=${v}`;
  });
  const root = o.cwdWithin === undefined ? [] : [o.cwdWithin];
  const strings = [o.cwd, ...root, ...o.argv, ...env];
  for (const s of strings)
    if (s.includes("\0"))
      throw new AgentdError("EVALIDATION", "exec: argv, cwd and env cannot hold a NUL byte");
  if (o.argv.length > 0xffff || env.length > 0xffff)
    throw new AgentdError("ETOOLARGE", "exec: more than 65,535 arguments or variables");
  const head = Buffer.alloc(13);
  head.writeUInt32BE(Math.min(Math.max(0, Math.ceil(o.timeoutMs)), 0xffffffff), 0);
  head.writeUInt32BE(Math.min(Math.max(0, Math.floor(o.maxOutputBytes)), 0xffffffff), 4);
  head.writeUInt8(
    (o.stdin ? 1 : 0) |
      (o.cwdWithin === undefined ? 0 : 2) |
      (o.private === true ? 4 : 0) |
      (o.homes === true ? 8 : 0),
    8,
  );
  head.writeUInt16BE(o.argv.length, 9);
  head.writeUInt16BE(env.length, 11);
  const body = Buffer.from(`${strings.join("\0")}\0`, "utf8");
  return frame("S", id, Buffer.concat([head, body]));
}

export interface Exit {
  code: number;
  flags: number;
  message: string;
}

export function parseExit(payload: Buffer): Exit {
  if (payload.length < 5) throw new Error("a short exit frame");
  return {
    code: payload.readInt32BE(0),
    flags: payload[4] as number,
    message: payload.subarray(5).toString("utf8"),
  };
}

/** Reassembles frames from arbitrary chunks; throws on a frame past MAX_RECEIVE. */
export class FrameReader {
  #buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer, onFrame: (f: Frame) => void): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    let at = 0;
    while (this.#buf.length - at >= HEADER_BYTES) {
      const len = this.#buf.readUInt32BE(at + 5);
      if (len > MAX_RECEIVE) throw new Error(`the agent sent a frame of ${len} bytes`);
      if (this.#buf.length - at < HEADER_BYTES + len) break;
      const type = String.fromCharCode(this.#buf[at] as number);
      const id = this.#buf.readUInt32BE(at + 1);
      onFrame({
        type,
        id,
        payload: this.#buf.subarray(at + HEADER_BYTES, at + HEADER_BYTES + len),
      });
      at += HEADER_BYTES + len;
    }
    this.#buf = at === this.#buf.length ? Buffer.alloc(0) : this.#buf.subarray(at);
  }
}
