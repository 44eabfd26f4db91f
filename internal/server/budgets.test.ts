/**
 * CreateRun's budget against a real `agentd server` whose maxima are configured: each limit
 * over the server's maximum is INVALID_ARGUMENT naming the field; within them, the run
 * carries its budget (GetRun, run.queued).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { assertGrpcError, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;
before(async () => {
  stack = await startStack({
    env: {
      AGENTD_MAX_RUN_TOKENS: "1000",
      AGENTD_MAX_RUN_COST_USD: "0.5",
      AGENTD_MAX_RUN_WALL_MS: "60000",
    },
  });
});
after(async () => {
  await stack?.stop();
});

describe("run budgets", { timeout: 60_000 }, () => {
  it("over the server's maxima: INVALID_ARGUMENT naming the field and the flag", async () => {
    for (const [budget, re] of [
      [
        { maxTokens: 1001n },
        /budget\.max_tokens: 1001 is over this server's maximum of 1000 tokens \(--max-run-tokens\)/,
      ],
      [{ maxCostMicros: 500_001n }, /budget\.max_cost_micros: .* \(--max-run-cost-usd\)/],
      [{ maxWallMs: 60_001n }, /budget\.max_wall_ms: .* \(--max-run-wall-ms\)/],
      [{ maxTokens: 18446744073709551615n }, /budget\.max_tokens/],
    ] as const)
      await assertGrpcError(
        stack.client.createRun({ prompt: "p", budget }),
        grpc.status.INVALID_ARGUMENT,
        re,
      );
  });

  it("within them: the run carries its budget", async () => {
    const budget = { maxTokens: 1000n, maxCostMicros: 500_000n, maxWallMs: 60_000n };
    const { run } = await stack.client.createRun({ prompt: "p", budget });
    const { run: got } = await stack.client.getRun(run?.runId as string);
    assert.deepEqual(
      [got?.budget?.maxTokens, got?.budget?.maxCostMicros, got?.budget?.maxWallMs],
      [1000n, 500_000n, 60_000n],
    );
  });
});
