/**
 * Integration test of `agentd dev`: the real process on the embedded (file) event log, no
 * auth, driven by grpc-js; its runs and events survive a SIGTERM and a restart on the same
 * data directory.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { eventsJson, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-dev-"));
const running: AgentdProcess[] = [];

after(async () => {
  await Promise.allSettled(running.map((p) => p.stop("SIGKILL")));
  rmSync(dir, { recursive: true, force: true });
});

async function startDev(): Promise<AgentdProcess> {
  const p = await startAgentd("dev", ["--data-dir", dir]);
  running.push(p);
  return p;
}

describe("agentd dev on the embedded log", { timeout: 180_000 }, () => {
  it("serves CreateRun and StreamEvents without auth; runs and events survive a restart", async () => {
    let dev = await startDev();
    let client = new GrpcRunClient(dev.addr); // no token at all
    let runId: string;
    let before: Event[];
    try {
      const { run } = await client.createRun({ prompt: "local work", labels: { env: "dev" } });
      assert.ok(run);
      runId = run.runId;
      assert.equal(run.tenantId, "default");
      assert.equal(run.state, RunState.QUEUED);

      const stream = client.streamEvents({ runId });
      await stream.waitForCount(1);
      assert.equal(stream.events[0]?.type, "run.queued");
      // Cancelling the queued run ends it: the open stream gets run.cancelled and ends.
      const { run: cancelled } = await client.cancelRun(runId, "enough");
      assert.equal(cancelled?.state, RunState.CANCELLED);
      const end = await stream.end();
      assert.equal(end.status.code, grpc.status.OK, end.error?.details);
      assert.deepEqual(
        stream.events.map((e) => [Number(e.seq), e.type]),
        [
          [1, "run.queued"],
          [2, "run.cancelled"],
        ],
      );
      before = stream.events;
    } finally {
      client.close();
    }

    const exit = await dev.stop("SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null }, dev.output());
    assert.ok(!existsSync(join(dir, "LOCK")), "a clean stop releases the data directory");

    dev = await startDev();
    client = new GrpcRunClient(dev.addr);
    try {
      const { run } = await client.getRun(runId);
      assert.equal(run?.state, RunState.CANCELLED);
      assert.equal(run?.prompt, "local work");
      assert.deepEqual(run?.labels, { env: "dev" });
      assert.equal(run?.lastSeq, 2n);

      const replay = client.streamEvents({ runId, afterSeq: 0n });
      const end = await replay.end();
      assert.equal(end.status.code, grpc.status.OK, end.error?.details);
      assert.deepEqual(eventsJson(replay.events), eventsJson(before));
      const verdict = verifyChain(eventsJson(replay.events));
      assert.equal(verdict.ok, true, JSON.stringify(verdict));
      assert.equal(verdict.ok && verdict.headHash, run?.lastHash);

      const { runs } = await client.listRuns({});
      assert.deepEqual(
        runs.map((r) => r.runId),
        [runId],
      );
    } finally {
      client.close();
    }
    assert.deepEqual(await dev.stop("SIGTERM"), { code: 0, signal: null });
  });
});
