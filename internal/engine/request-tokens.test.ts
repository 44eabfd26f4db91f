/**
 * The whole-request estimate (request-tokens.ts): every part of a request counts — the
 * system prompt, each message (a tool result too), each tool declaration — and a request
 * grows by what a large tool output adds; the maximum output is no part of the prompt.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { EngineRequest } from "./port.ts";
import { estimateRequestTokens } from "./request-tokens.ts";

const base: EngineRequest = {
  system: "s".repeat(400),
  messages: [{ role: "user", text: "u".repeat(400) }],
  tools: [{ name: "repo.read", description: "d".repeat(400), inputSchema: { type: "object" } }],
};

describe("estimateRequestTokens", () => {
  it("counts the system prompt, the messages and the tools, each at about 4 bytes a token", () => {
    const n = estimateRequestTokens(base);
    // 100 each for system, user text and description, plus schema and overheads.
    assert.ok(n >= 300 && n < 400, `estimated ${n}`);
    const noTools = estimateRequestTokens({ ...base, tools: [] });
    assert.ok(n - noTools >= 100, "the tool declarations count");
    const noSystem = estimateRequestTokens({ ...base, system: "" });
    assert.equal(n - noSystem, 100, "the system prompt counts once");
  });

  it("a tool result of 60,000 bytes adds about 15,000 tokens; the maximum output adds none", () => {
    const big: EngineRequest = {
      ...base,
      messages: [
        ...base.messages,
        {
          role: "assistant",
          text: "",
          toolCalls: [{ callId: "c1", tool: "process.run", input: {} }],
        },
        { role: "tool", callId: "c1", tool: "process.run", output: { stdout: "a".repeat(60_000) } },
      ],
    };
    const grown = estimateRequestTokens(big) - estimateRequestTokens(base);
    assert.ok(grown >= 15_000 && grown < 15_100, `grew by ${grown}`);
    assert.equal(
      estimateRequestTokens({ ...big, maxOutputTokens: 9_999 }),
      estimateRequestTokens(big),
    );
  });
});
