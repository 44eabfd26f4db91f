/**
 * A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (node:http), for tests
 * that drive the real HTTP path of `@ai-sdk/openai`, and later for the demo's replay model
 * and worker tests. Each POST /chat/completions is answered by `script({ body, n })`:
 * SSE chunks (`data: {...}\n\n`, then `data: [DONE]`), an error status, or a dropped
 * connection. Every request is recorded (parsed body, headers) for assertions.
 *
 * Must never: listen on anything but loopback, or answer without the script (no defaults
 * that would hide a test's mistake: an unscripted request gets a 500 naming it).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One streamed chunk: an object is sent as JSON, a string as is (malformed input). */
export type StubChunk = Record<string, unknown> | string;

export type StubReply =
  | {
      chunks: StubChunk[];
      /** Pause between chunks (ms), so a client sees them arrive separately. */
      chunkDelayMs?: number;
      /** Leave out the final `data: [DONE]` (a stream cut short). */
      omitDone?: boolean;
    }
  | { status: number; headers?: Record<string, string>; body?: unknown }
  /** Close the socket without answering (a connection reset). */
  | { drop: true };

export interface StubRequest {
  /** 1 for the first request the stub received, then 2, 3… */
  n: number;
  path: string;
  headers: IncomingMessage["headers"];
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON request body, for assertions
  body: any;
}

export interface OpenAiStub {
  /** Base URL for `createOpenAI({ baseURL })`, e.g. http://127.0.0.1:PORT/v1 */
  baseURL: string;
  requests: StubRequest[];
  close(): Promise<void>;
}

/**
 * `host`: the address to listen on (default loopback); a test cluster's Pods reach the
 * stub on the cluster bridge's address (internal/testing/kubernetes.ts HOST_FROM_PODS).
 */
export async function startOpenAiStub(
  script: (req: StubRequest) => StubReply | Promise<StubReply>,
  host = "127.0.0.1",
): Promise<OpenAiStub> {
  const requests: StubRequest[] = [];
  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `stub: ${String(err)}`, type: "stub" } }));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const parts: Buffer[] = [];
    for await (const c of req) parts.push(c as Buffer);
    const text = Buffer.concat(parts).toString("utf8");
    const entry: StubRequest = {
      n: requests.length + 1,
      path: req.url ?? "",
      headers: req.headers,
      body: text === "" ? undefined : JSON.parse(text),
    };
    requests.push(entry);
    if (req.method !== "POST" || !entry.path.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `stub: no route ${entry.path}` } }));
      return;
    }
    const reply = await script(entry);
    if ("drop" in reply) {
      req.socket.destroy();
      return;
    }
    if ("status" in reply) {
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(JSON.stringify(reply.body ?? { error: { message: `stub status ${reply.status}` } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const chunk of reply.chunks) {
      if (reply.chunkDelayMs) await new Promise((r) => setTimeout(r, reply.chunkDelayMs));
      if (res.destroyed) return;
      res.write(`data: ${typeof chunk === "string" ? chunk : JSON.stringify(chunk)}\n\n`);
    }
    if (!reply.omitDone) res.write("data: [DONE]\n\n");
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://${host}:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------
// Chunk builders: the shapes the chat-completions API streams.

const MODEL = "gpt-stub";

/** One `chat.completion.chunk` with one choice. */
export function chunk(
  delta: Record<string, unknown>,
  finishReason: string | null = null,
): Record<string, unknown> {
  return {
    id: "chatcmpl-stub",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: MODEL,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** The final usage chunk sent when `stream_options.include_usage` is set. */
export function usageChunk(promptTokens: number, completionTokens: number) {
  return {
    id: "chatcmpl-stub",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: MODEL,
    choices: [],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

/** A text answer streamed in the given pieces, then finish_reason "stop" and usage. */
export function textReply(pieces: string[], usage: [number, number] = [10, 5]): StubChunk[] {
  return [
    chunk({ role: "assistant", content: "" }),
    ...pieces.map((content) => chunk({ content })),
    chunk({}, "stop"),
    usageChunk(...usage),
  ];
}

export interface StubToolCall {
  id: string;
  name: string;
  /** The arguments as the model writes them (may be malformed on purpose). */
  arguments: string;
  /** How many chunks the arguments are split over (default 1). */
  pieces?: number;
}

/** Tool calls (index 0, 1…), arguments split over chunks, then "tool_calls" and usage. */
export function toolCallsReply(calls: StubToolCall[], usage: [number, number] = [20, 8]) {
  const out: StubChunk[] = [chunk({ role: "assistant", content: null })];
  calls.forEach((c, index) => {
    const n = Math.max(1, c.pieces ?? 1);
    const size = Math.ceil(c.arguments.length / n);
    for (let i = 0; i < n; i++) {
      const args = c.arguments.slice(i * size, (i + 1) * size);
      const fn = i === 0 ? { name: c.name, arguments: args } : { arguments: args };
      const call =
        i === 0 ? { index, id: c.id, type: "function", function: fn } : { index, function: fn };
      out.push(chunk({ tool_calls: [call] }));
    }
  });
  out.push(chunk({}, "tool_calls"), usageChunk(...usage));
  return out;
}
