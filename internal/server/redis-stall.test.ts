/**
 * A Redis stall: the server answers UNAVAILABLE within its own deadline (--redis-timeout-ms)
 * instead of letting the request hang for the whole stall, and serves again once Redis
 * does. A real server process on a private redis-server paused with CLIENT PAUSE.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;
let server: AgentdProcess;

before(async () => {
  stack = await startStack();
  server = await startAgentd("server", [...stack.flags, "--redis-timeout-ms", "1000"]);
});
after(async () => {
  await server?.stop("SIGKILL");
  await stack?.stop();
});

it("answers UNAVAILABLE within its deadline while Redis is paused, then serves again", {
  timeout: 60_000,
}, async () => {
  const client = new GrpcRunClient(server.addr, TOKENS.acme);
  try {
    const { run } = await client.createRun({ prompt: "p" });
    const runId = run?.runId as string;
    await stack.redis.client().call("CLIENT", "PAUSE", "8000", "ALL");
    // A server that waited the stall out would answer this read OK, not UNAVAILABLE.
    const err = await assertGrpcError(client.getRun(runId), grpc.status.UNAVAILABLE);
    assert.match(decodeURIComponent(err.details), /did not answer in time|cannot be reached/);
    await stack.redis.client().call("CLIENT", "UNPAUSE");
    assert.equal((await client.getRun(runId)).run?.runId, runId);
  } finally {
    client.close();
  }
});
