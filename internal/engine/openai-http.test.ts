/**
 * The AI SDK adapter over the REAL HTTP path of @ai-sdk/openai: a scripted chat-completions
 * server on 127.0.0.1 (internal/testing/openai-stub.ts) streams SSE chunks, errors and
 * dropped connections; the engine must map, retry and fail exactly as the port says.
 */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, describe, test } from "node:test";
import {
  type OpenAiStub,
  type StubReply,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { type AiSdkEngineOptions, createAiSdkEngine, createOpenAiModel } from "./ai-sdk-engine.ts";
import type { EngineEvent, EngineRequest } from "./port.ts";

const readSchema = {
  type: "object",
  properties: { path: { type: "string" } },
  required: ["path"],
  additionalProperties: false,
};

const req: EngineRequest = {
  system: "You are agentd. Use tools.",
  messages: [{ role: "user", text: "fix the failing test" }],
  tools: [
    { name: "repo.read", description: "Read a file", inputSchema: readSchema },
    {
      name: "process.run",
      description: "Run a command",
      inputSchema: { type: "object", properties: { command: { type: "string" } } },
    },
  ],
  maxOutputTokens: 256,
};

const stubs: OpenAiStub[] = [];
after(async () => {
  await Promise.all(stubs.map((s) => s.close()));
});

async function stub(script: (r: { n: number }) => StubReply): Promise<OpenAiStub> {
  const s = await startOpenAiStub(script);
  stubs.push(s);
  return s;
}

async function runAgainst(
  baseURL: string,
  opts: Partial<AiSdkEngineOptions> = {},
  fetchCount?: { n: number },
): Promise<EngineEvent[]> {
  const model = createOpenAiModel({
    baseURL,
    apiKey: "test-key",
    model: "gpt-4o-mini",
    ...(fetchCount === undefined
      ? {}
      : {
          fetch: (input, init) => {
            fetchCount.n++;
            return fetch(input, init);
          },
        }),
  });
  const engine = createAiSdkEngine({ model, retryBaseMs: 5, random: () => 0.5, ...opts });
  const out: EngineEvent[] = [];
  for await (const e of engine.run(req, AbortSignal.timeout(20_000))) out.push(e);
  return out;
}

const text = (events: EngineEvent[]) =>
  events.map((e) => (e.type === "text-delta" ? e.text : "")).join("");

describe("ai-sdk engine over HTTP (OpenAI chat completions, streamed)", () => {
  test("streams text; the request declares the system prompt and the tools", async () => {
    const s = await stub(() => ({ chunks: textReply(["Hel", "lo ", "world"]), chunkDelayMs: 5 }));
    const events = await runAgainst(s.baseURL);
    assert.deepEqual(
      events.filter((e) => e.type === "text-delta"),
      [
        { type: "text-delta", text: "Hel" },
        { type: "text-delta", text: "lo " },
        { type: "text-delta", text: "world" },
      ],
    );
    assert.deepEqual(events.at(-1), {
      type: "finish",
      reason: "stop",
      usage: { inputTokens: 10, outputTokens: 5 },
      model: "gpt-stub",
    });

    assert.equal(s.requests.length, 1);
    const r = s.requests[0];
    assert.ok(r);
    assert.equal(r.path, "/v1/chat/completions");
    assert.equal(r.headers.authorization, "Bearer test-key");
    assert.equal(r.body.model, "gpt-4o-mini");
    assert.equal(r.body.stream, true);
    assert.deepEqual(r.body.stream_options, { include_usage: true });
    assert.equal(r.body.max_tokens, 256);
    assert.deepEqual(r.body.messages, [
      { role: "system", content: "You are agentd. Use tools." },
      { role: "user", content: "fix the failing test" },
    ]);
    assert.deepEqual(
      r.body.tools.map((t: { type: string; function: { name: string } }) => [
        t.type,
        t.function.name,
      ]),
      [
        ["function", "repo_read"],
        ["function", "process_run"],
      ],
    );
    assert.deepEqual(r.body.tools[0].function.parameters, readSchema);
    assert.equal(r.body.tools[0].function.description, "Read a file");
  });

  test("tool call arguments split over several chunks arrive whole", async () => {
    const s = await stub(() => ({
      chunks: toolCallsReply([
        { id: "call_1", name: "repo_read", arguments: '{"path":"src/a.test.ts"}', pieces: 5 },
      ]),
      chunkDelayMs: 2,
    }));
    const events = await runAgainst(s.baseURL);
    assert.deepEqual(events, [
      { type: "tool-call", callId: "call_1", tool: "repo.read", input: { path: "src/a.test.ts" } },
      {
        type: "finish",
        reason: "tool-calls",
        usage: { inputTokens: 20, outputTokens: 8 },
        model: "gpt-stub",
      },
    ]);
  });

  test("two tool calls in one response, in order, with usage", async () => {
    const s = await stub(() => ({
      chunks: toolCallsReply(
        [
          { id: "call_a", name: "repo_read", arguments: '{"path":"a"}', pieces: 2 },
          { id: "call_b", name: "process_run", arguments: '{"command":"npm test"}', pieces: 3 },
        ],
        [321, 45],
      ),
    }));
    const events = await runAgainst(s.baseURL);
    assert.deepEqual(events, [
      { type: "tool-call", callId: "call_a", tool: "repo.read", input: { path: "a" } },
      { type: "tool-call", callId: "call_b", tool: "process.run", input: { command: "npm test" } },
      {
        type: "finish",
        reason: "tool-calls",
        usage: { inputTokens: 321, outputTokens: 45 },
        model: "gpt-stub",
      },
    ]);
  });

  test("500 then success: retried, one event stream, no duplicate text", async () => {
    const s = await stub(({ n }) =>
      n === 1
        ? { status: 500, body: { error: { message: "boom" } } }
        : { chunks: textReply(["once"]) },
    );
    const retries: string[] = [];
    const events = await runAgainst(s.baseURL, { onRetry: (r) => retries.push(r.error.code) });
    assert.equal(s.requests.length, 2);
    assert.deepEqual(retries, ["EMODEL_UNAVAILABLE"]);
    assert.equal(text(events), "once");
    assert.deepEqual(
      events.map((e) => e.type),
      ["text-delta", "finish"],
    );
  });

  test("a dropped connection then success: retried", async () => {
    const s = await stub(({ n }) => (n === 1 ? { drop: true } : { chunks: textReply(["ok"]) }));
    const events = await runAgainst(s.baseURL);
    assert.equal(s.requests.length, 2);
    assert.equal(text(events), "ok");
    assert.equal(events.at(-1)?.type, "finish");
  });

  test("429 with retry-after then success: waits as told, then streams", async () => {
    const s = await stub(({ n }) =>
      n === 1
        ? {
            status: 429,
            headers: { "retry-after": "1" },
            body: { error: { message: "slow down", type: "rate_limit" } },
          }
        : { chunks: textReply(["after the wait"]) },
    );
    const delays: number[] = [];
    const t0 = performance.now();
    const events = await runAgainst(s.baseURL, { onRetry: (r) => delays.push(r.delayMs) });
    const elapsed = performance.now() - t0;
    assert.equal(s.requests.length, 2);
    assert.deepEqual(delays, [1000]);
    assert.ok(elapsed >= 950, `waited ${elapsed} ms`);
    assert.equal(text(events), "after the wait");
  });

  test("401: EMODEL_AUTH at once, exactly one request", async () => {
    const s = await stub(() => ({
      status: 401,
      body: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } },
    }));
    const events = await runAgainst(s.baseURL);
    assert.equal(s.requests.length, 1);
    assert.equal(events.length, 1);
    const e = events[0];
    assert.ok(e?.type === "error");
    assert.equal(e.error.code, "EMODEL_AUTH");
    assert.equal(e.error.retryable, false);
    assert.match(e.error.message, /HTTP 401: Incorrect API key provided/);
    assert.doesNotMatch(e.error.message, /test-key/);
  });

  test("an unreachable endpoint: EMODEL_UNAVAILABLE after the bounded retries", async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen(0, "127.0.0.1", () => {
        const a = srv.address();
        const p = typeof a === "object" && a !== null ? a.port : 0;
        srv.close(() => resolve(p));
      });
    });
    const attempts = { n: 0 };
    const retries: number[] = [];
    const events = await runAgainst(
      `http://127.0.0.1:${port}/v1`,
      { maxRetries: 3, onRetry: (r) => retries.push(r.delayMs) },
      attempts,
    );
    assert.equal(attempts.n, 4, "one try and three retries");
    assert.deepEqual(retries, [6, 12, 25], "exponential backoff (5 ms base) plus jitter");
    assert.equal(events.length, 1);
    const e = events[0];
    assert.ok(e?.type === "error");
    assert.equal(e.error.code, "EMODEL_UNAVAILABLE");
    assert.equal(e.error.retryable, true);
    assert.match(e.error.message, /Cannot connect to API/);
  });

  test("malformed tool-call JSON: tool-call-error, the step still finishes", async () => {
    const s = await stub(() => ({
      chunks: toolCallsReply([
        { id: "call_x", name: "repo_read", arguments: '{"path": "a.txt", oops}', pieces: 3 },
        { id: "call_y", name: "git_push", arguments: "{}" },
      ]),
    }));
    const events = await runAgainst(s.baseURL);
    assert.deepEqual(events.slice(0, 2), [
      {
        type: "tool-call-error",
        callId: "call_x",
        tool: "repo.read",
        input: '{"path": "a.txt", oops}',
        error: {
          code: "EBAD_TOOL_INPUT",
          message: "the arguments of repo_read are not valid JSON",
        },
      },
      {
        type: "tool-call-error",
        callId: "call_y",
        tool: "git_push",
        input: {},
        error: {
          code: "EUNKNOWN_TOOL",
          message: 'unknown tool "git_push"; available tools: repo_read, process_run',
        },
      },
    ]);
    assert.equal(events[2]?.type, "finish");
  });

  test("a stream cut short after text: EMODEL_UNAVAILABLE, not retried", async () => {
    const s = await stub(() => ({
      chunks: textReply(["half an ans"]).slice(0, 2),
      omitDone: true,
    }));
    const events = await runAgainst(s.baseURL);
    assert.equal(s.requests.length, 1);
    assert.equal(text(events), "half an ans");
    const last = events.at(-1);
    assert.ok(last?.type === "error");
    assert.equal(last.error.code, "EMODEL_UNAVAILABLE");
  });
});
