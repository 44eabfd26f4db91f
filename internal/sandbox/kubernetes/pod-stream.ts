/**
 * A stream into a Pod's container through the API server (pods/exec), as a Node Duplex:
 * the Kubernetes channel protocol (v5.channel.k8s.io, else v4: each WebSocket message is
 * one byte of stream number — 0 stdin, 1 stdout, 2 stderr, 3 status — then data), with
 * backpressure both ways: a write completes when the socket took it, and a reader that
 * stops reading pauses the socket (the API server, then the agent, then tar wait).
 *
 * @kubernetes/client-node opens the WebSocket (its kubeconfig auth and TLS, the protocol
 * negotiation); its Exec/Attach helpers are not used because they write stdin without
 * waiting and stdout without looking at the return value: a workspace of gigabytes would
 * be held in memory on one side or the other.
 *
 * Must never: buffer more than one stream high-water mark of output, or resolve a write
 * before the socket accepted it.
 */
import { Duplex } from "node:stream";
import { Exec, type KubeConfig } from "@kubernetes/client-node";
import type { OutputStreamName } from "../port.ts";

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const STATUS = 3;
const CLOSE = 255;

/** The part of `ws` this module uses (isomorphic-ws is `ws` on Node). */
interface Socket {
  readonly protocol: string;
  send(data: Buffer, cb: (err?: Error) => void): void;
  pause(): void;
  resume(): void;
  close(): void;
  terminate(): void;
  on(event: "close", f: (code: number, reason: Buffer) => void): void;
  on(event: "error", f: (err: Error) => void): void;
}

export interface PodStream {
  /** stdin on write, stdout on read; ends when the exec ends. */
  readonly io: Duplex;
  /** Each piece of stdout and stderr, in order (registers the reader: call once). */
  split(io: Duplex, f: (name: OutputStreamName, chunk: Buffer) => void): void;
  /** The exec's final status (stream 3), once the exec ended; "" while it runs. */
  readonly status: () => string;
}

/** The exec path of a command in a Pod's container, stdin, stdout and stderr attached. */
export function execPath(
  namespace: string,
  pod: string,
  container: string,
  argv: string[],
): string {
  const q = new URLSearchParams({ container, stdin: "true", stdout: "true", stderr: "true" });
  for (const a of argv) q.append("command", a);
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/exec?${q}`;
}

/** Opens `path` (execPath) on the cluster `kc` names. */
export async function openPodStream(kc: KubeConfig, path: string): Promise<PodStream> {
  let ws: Socket | undefined;
  let closed = false;
  let status = "";
  let onStderr: (chunk: Buffer) => void = () => undefined;
  const io = new Duplex({
    allowHalfOpen: true,
    read() {
      ws?.resume();
    },
    write(chunk: Buffer, _enc, cb) {
      if (ws === undefined || closed) return cb(new Error("the exec stream is closed"));
      ws.send(Buffer.concat([Buffer.of(STDIN), chunk]), cb);
    },
    final(cb) {
      // v5 can close stdin alone; v4 cannot: the exec's stdin then stays open until the end.
      if (ws?.protocol === "v5.channel.k8s.io") ws.send(Buffer.of(CLOSE, STDIN), cb);
      else cb();
    },
    destroy(err, cb) {
      ws?.terminate();
      cb(err);
    },
  });
  const onMessage = (stream: number, data: Buffer): boolean => {
    if (stream === STDOUT) {
      if (data.length > 0 && !io.push(data)) ws?.pause();
    } else if (stream === STDERR) onStderr(data);
    else if (stream === STATUS) status += data.toString("utf8");
    return true;
  };
  const socket = (await new Exec(kc).handler.connect(path, null, onMessage)) as unknown as Socket;
  ws = socket;
  socket.on("close", () => {
    closed = true;
    io.push(null); // what was read stays readable; the reader then sees the end
  });
  socket.on("error", (err) => io.destroy(err));
  return {
    io,
    split(stream, f) {
      onStderr = (chunk) => f("stderr", chunk);
      stream.on("data", (chunk: Buffer) => f("stdout", chunk));
    },
    status: () => status,
  };
}
