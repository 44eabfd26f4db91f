/**
 * The AI SDK adapter driven by the SDK's own mock language model (MockLanguageModelV4):
 * stream part mapping, tool declarations without execute, bad tool calls, usage, abort,
 * retries before anything was yielded, and the conversation history's shape.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { APICallError } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { isAgentdError } from "../errors.ts";
import { createAiSdkEngine, createOpenAiModel, wireToolName } from "./ai-sdk-engine.ts";
import type { EngineEvent, EngineRequest } from "./port.ts";

type StreamResult = Awaited<ReturnType<MockLanguageModelV4["doStream"]>>;
type Part = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;

const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

function finishPart(unified: "stop" | "tool-calls" | "length", i = 10, o = 5): Part {
  return { type: "finish", finishReason: { unified, raw: unified }, usage: usage(i, o) };
}

function streamOf(parts: Part[]): StreamResult {
  return { stream: ReadableStream.from(parts) };
}

function textParts(...pieces: string[]): Part[] {
  return [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    ...pieces.map((delta): Part => ({ type: "text-delta", id: "t", delta })),
    { type: "text-end", id: "t" },
  ];
}

function call(id: string, toolName: string, input: string): Part {
  return { type: "tool-call", toolCallId: id, toolName, input };
}

const readSchema = {
  type: "object",
  properties: { path: { type: "string" } },
  required: ["path"],
  additionalProperties: false,
};

function request(over: Partial<EngineRequest> = {}): EngineRequest {
  return {
    system: "You are agentd's test agent.",
    messages: [{ role: "user", text: "read a.txt" }],
    tools: [
      { name: "repo.read", description: "Read a file", inputSchema: readSchema },
      { name: "process.run", description: "Run a command", inputSchema: { type: "object" } },
    ],
    ...over,
  };
}

async function collect(
  it: AsyncIterable<EngineEvent>,
  onEvent?: (e: EngineEvent) => void,
): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  for await (const e of it) {
    out.push(e);
    onEvent?.(e);
  }
  return out;
}

const fast = { retryBaseMs: 1, random: () => 0 };

describe("ai-sdk engine (mock model)", () => {
  test("streams text deltas in order and finishes with usage", async () => {
    const model = new MockLanguageModelV4({
      doStream: streamOf([...textParts("Hel", "lo", "", " world"), finishPart("stop", 12, 3)]),
    });
    const events = await collect(createAiSdkEngine({ model }).run(request(), AbortSignal.any([])));
    assert.deepEqual(events, [
      { type: "text-delta", text: "Hel" },
      { type: "text-delta", text: "lo" },
      { type: "text-delta", text: " world" },
      {
        type: "finish",
        reason: "stop",
        usage: { inputTokens: 12, outputTokens: 3 },
        model: "mock-model-id",
      },
    ]);
    const sent = model.doStreamCalls[0];
    assert.ok(sent);
    assert.deepEqual(sent.prompt[0], { role: "system", content: "You are agentd's test agent." });
  });

  test("declares tools by wire name with their JSON schema; a valid call maps back", async () => {
    const model = new MockLanguageModelV4({
      doStream: streamOf([
        { type: "stream-start", warnings: [] },
        call("c1", "repo_read", '{"path":"a.txt"}'),
        finishPart("tool-calls"),
      ]),
    });
    const events = await collect(createAiSdkEngine({ model }).run(request(), AbortSignal.any([])));
    assert.deepEqual(events[0], {
      type: "tool-call",
      callId: "c1",
      tool: "repo.read",
      input: { path: "a.txt" },
    });
    assert.equal(events.length, 2, "no tool result: nothing was executed");
    assert.deepEqual(events[1], {
      type: "finish",
      reason: "tool-calls",
      usage: { inputTokens: 10, outputTokens: 5 },
      model: "mock-model-id",
    });
    const tools = model.doStreamCalls[0]?.tools ?? [];
    assert.deepEqual(
      tools.map((t) => t.name),
      ["repo_read", "process_run"],
    );
    const read = tools.find((t) => t.name === "repo_read");
    assert.ok(read && read.type === "function");
    assert.deepEqual(read.inputSchema, readSchema);
    assert.equal(read.description, "Read a file");
  });

  test("malformed arguments and non-object arguments: tool-call-error, the step goes on", async () => {
    const model = new MockLanguageModelV4({
      doStream: streamOf([
        { type: "stream-start", warnings: [] },
        call("c1", "repo_read", '{"path": "a.txt"'),
        call("c2", "repo_read", "[1,2]"),
        call("c3", "repo_read", '{"path":"b.txt"}'),
        finishPart("tool-calls"),
      ]),
    });
    const events = await collect(createAiSdkEngine({ model }).run(request(), AbortSignal.any([])));
    assert.deepEqual(
      events.map((e) => e.type),
      ["tool-call-error", "tool-call-error", "tool-call", "finish"],
    );
    assert.deepEqual(events[0], {
      type: "tool-call-error",
      callId: "c1",
      tool: "repo.read",
      input: '{"path": "a.txt"',
      error: { code: "EBAD_TOOL_INPUT", message: "the arguments of repo_read are not valid JSON" },
    });
    const second = events[1];
    assert.ok(second?.type === "tool-call-error");
    assert.equal(second.error.code, "EBAD_TOOL_INPUT");
    assert.match(second.error.message, /must be a JSON object/);
    assert.deepEqual(second.input, [1, 2]);
  });

  test("an unknown tool name: tool-call-error EUNKNOWN_TOOL naming the available tools", async () => {
    const model = new MockLanguageModelV4({
      doStream: streamOf([
        { type: "stream-start", warnings: [] },
        call("c9", "rm_rf", "{}"),
        finishPart("tool-calls"),
      ]),
    });
    const events = await collect(createAiSdkEngine({ model }).run(request(), AbortSignal.any([])));
    assert.deepEqual(events[0], {
      type: "tool-call-error",
      callId: "c9",
      tool: "rm_rf",
      input: {},
      error: {
        code: "EUNKNOWN_TOOL",
        message: 'unknown tool "rm_rf"; available tools: repo_read, process_run',
      },
    });
    assert.equal(events[1]?.type, "finish");
  });

  test("abort via the signal ends the step with EABORTED and aborts the model call", async () => {
    let modelSawAbort = false;
    const model = new MockLanguageModelV4({
      doStream: async ({ abortSignal }) => ({
        stream: new ReadableStream<Part>({
          start(c) {
            for (const p of textParts("partial")) c.enqueue(p);
            abortSignal?.addEventListener("abort", () => {
              modelSawAbort = true;
              c.error(abortSignal.reason);
            });
          },
        }),
      }),
    });
    const ac = new AbortController();
    const events = await collect(createAiSdkEngine({ model }).run(request(), ac.signal), (e) => {
      if (e.type === "text-delta") ac.abort();
    });
    assert.deepEqual(events, [
      { type: "text-delta", text: "partial" },
      {
        type: "error",
        error: { code: "EABORTED", message: "the model step was aborted", retryable: false },
      },
    ]);
    assert.equal(modelSawAbort, true);
    assert.equal(model.doStreamCalls.length, 1);
  });

  test("a consumer that stops early aborts the model call", async () => {
    let modelSawAbort = false;
    const model = new MockLanguageModelV4({
      doStream: async ({ abortSignal }) => ({
        stream: new ReadableStream<Part>({
          start(c) {
            for (const p of textParts("first")) c.enqueue(p);
            abortSignal?.addEventListener("abort", () => {
              modelSawAbort = true;
              c.error(abortSignal.reason);
            });
          },
        }),
      }),
    });
    for await (const e of createAiSdkEngine({ model }).run(request(), AbortSignal.any([]))) {
      assert.equal(e.type, "text-delta");
      break;
    }
    assert.equal(modelSawAbort, true);
  });

  test("a transient error before any output is retried; after output it is not", async () => {
    const err503 = () =>
      new APICallError({ message: "overloaded", url: "u", requestBodyValues: {}, statusCode: 503 });
    let n = 0;
    const model = new MockLanguageModelV4({
      doStream: async () => {
        n++;
        if (n < 3) throw err503();
        return streamOf([...textParts("ok"), finishPart("stop")]);
      },
    });
    const retries: number[] = [];
    const engine = createAiSdkEngine({
      model,
      ...fast,
      onRetry: (r) => retries.push(r.attempt),
    });
    const events = await collect(engine.run(request(), AbortSignal.any([])));
    assert.deepEqual(
      events.map((e) => e.type),
      ["text-delta", "finish"],
    );
    assert.deepEqual(retries, [1, 2]);

    const midStream = new MockLanguageModelV4({
      doStream: streamOf([...textParts("half"), { type: "error", error: err503() }]),
    });
    const ev2 = await collect(
      createAiSdkEngine({ model: midStream, ...fast }).run(request(), AbortSignal.any([])),
    );
    assert.equal(midStream.doStreamCalls.length, 1, "text was yielded: no retry");
    assert.deepEqual(ev2.at(-1), {
      type: "error",
      error: { code: "EMODEL_UNAVAILABLE", message: "HTTP 503: overloaded", retryable: true },
    });
  });

  test("401 fails at once with EMODEL_AUTH; retries stop at maxRetries", async () => {
    const auth = new MockLanguageModelV4({
      doStream: async () => {
        throw new APICallError({
          message: "bad key",
          url: "u",
          requestBodyValues: {},
          statusCode: 401,
        });
      },
    });
    const ev = await collect(
      createAiSdkEngine({ model: auth, ...fast }).run(request(), AbortSignal.any([])),
    );
    assert.equal(auth.doStreamCalls.length, 1);
    assert.deepEqual(ev, [
      {
        type: "error",
        error: { code: "EMODEL_AUTH", message: "HTTP 401: bad key", retryable: false },
      },
    ]);

    const down = new MockLanguageModelV4({
      doStream: async () => {
        throw new APICallError({
          message: "busy",
          url: "u",
          requestBodyValues: {},
          statusCode: 429,
        });
      },
    });
    const ev2 = await collect(
      createAiSdkEngine({ model: down, maxRetries: 2, ...fast }).run(
        request(),
        AbortSignal.any([]),
      ),
    );
    assert.equal(down.doStreamCalls.length, 3);
    assert.equal(ev2.length, 1);
    assert.deepEqual(ev2[0], {
      type: "error",
      error: { code: "EMODEL_RATE_LIMIT", message: "HTTP 429: busy", retryable: true },
    });
  });

  test("a model that goes silent times out (EMODEL_TIMEOUT) and is retried", async () => {
    let n = 0;
    const model = new MockLanguageModelV4({
      doStream: async () => {
        n++;
        if (n === 1) return { stream: new ReadableStream<Part>({ start() {} }) }; // silent
        return streamOf([...textParts("late"), finishPart("stop")]);
      },
    });
    const ev = await collect(
      createAiSdkEngine({ model, idleTimeoutMs: 50, ...fast }).run(request(), AbortSignal.any([])),
    );
    assert.deepEqual(
      ev.map((e) => e.type),
      ["text-delta", "finish"],
    );
    const silent = new MockLanguageModelV4({
      doStream: async () => ({ stream: new ReadableStream<Part>({ start() {} }) }),
    });
    const ev2 = await collect(
      createAiSdkEngine({ model: silent, idleTimeoutMs: 20, maxRetries: 1, ...fast }).run(
        request(),
        AbortSignal.any([]),
      ),
    );
    assert.equal(silent.doStreamCalls.length, 2);
    assert.equal(ev2.length, 1);
    assert.ok(ev2[0]?.type === "error");
    assert.equal(ev2[0].error.code, "EMODEL_TIMEOUT");
  });

  test("history: tool calls and results reach the model under wire names", async () => {
    const model = new MockLanguageModelV4({
      doStream: streamOf([...textParts("done"), finishPart("stop")]),
    });
    const req = request({
      messages: [
        { role: "user", text: "fix it" },
        {
          role: "assistant",
          text: "Looking.",
          toolCalls: [
            { callId: "a", tool: "repo.read", input: { path: "x" } },
            { callId: "b", tool: "process.run", input: { command: "rm -rf /" } },
          ],
        },
        { role: "tool", callId: "a", tool: "repo.read", output: "contents" },
        {
          role: "tool",
          callId: "b",
          tool: "process.run",
          error: { code: "EPOLICY", message: "denied" },
        },
        { role: "assistant", text: "", toolCalls: [{ callId: "c", tool: "nope", input: "{bad" }] },
        {
          role: "tool",
          callId: "c",
          tool: "nope",
          error: { code: "EUNKNOWN_TOOL", message: "unknown" },
        },
      ],
    });
    const ev = await collect(createAiSdkEngine({ model }).run(req, AbortSignal.any([])));
    assert.equal(ev.at(-1)?.type, "finish");
    const prompt = model.doStreamCalls[0]?.prompt ?? [];
    assert.deepEqual(
      prompt.map((m) => m.role),
      ["system", "user", "assistant", "tool", "assistant", "tool"],
    );
    const assistant = prompt[2];
    assert.ok(assistant?.role === "assistant");
    assert.deepEqual(
      assistant.content.map((c) => (c.type === "tool-call" ? c.toolName : c.type)),
      ["text", "repo_read", "process_run"],
    );
    const results = prompt[3];
    assert.ok(results?.role === "tool");
    assert.deepEqual(
      results.content.map((c) => (c.type === "tool-result" ? c.output : c.type)),
      [
        { type: "text", value: "contents" },
        { type: "error-text", value: "EPOLICY: denied" },
      ],
    );
  });

  test("a missing tool result or colliding tool names: EMODEL_BAD_REQUEST, no model call", async () => {
    const model = new MockLanguageModelV4({ doStream: streamOf([finishPart("stop")]) });
    const engine = createAiSdkEngine({ model, ...fast });
    const missing = await collect(
      engine.run(
        request({
          messages: [
            { role: "user", text: "go" },
            {
              role: "assistant",
              text: "",
              toolCalls: [{ callId: "a", tool: "repo.read", input: {} }],
            },
          ],
        }),
        AbortSignal.any([]),
      ),
    );
    assert.ok(missing[0]?.type === "error");
    assert.equal(missing[0].error.code, "EMODEL_BAD_REQUEST");
    const clash = await collect(
      engine.run(
        request({
          tools: [
            { name: "a.b", description: "", inputSchema: { type: "object" } },
            { name: "a_b", description: "", inputSchema: { type: "object" } },
          ],
        }),
        AbortSignal.any([]),
      ),
    );
    assert.ok(clash[0]?.type === "error");
    assert.equal(clash[0].error.code, "EMODEL_BAD_REQUEST");
    assert.equal(model.doStreamCalls.length, 0);
  });

  test("createOpenAiModel refuses an empty key or model id", () => {
    assert.throws(
      () => createOpenAiModel({ apiKey: "", model: "gpt-4o" }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "apiKey",
    );
    assert.throws(
      () => createOpenAiModel({ apiKey: "k", model: "" }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "model",
    );
    assert.equal(createOpenAiModel({ apiKey: "k", model: "gpt-4o" }).modelId, "gpt-4o");
  });

  test("wire names follow OpenAI's function-name rule", () => {
    assert.equal(wireToolName("repo.read"), "repo_read");
    assert.equal(wireToolName("lint.run"), "lint_run");
    assert.match(wireToolName("x y/z".repeat(30)), /^[A-Za-z0-9_-]{1,64}$/);
  });
});
