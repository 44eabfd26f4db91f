/**
 * Retention through real `agentd server` processes on a private redis-server: a run that
 * ended longer ago than its tenant's retention disappears (GetRun NOT_FOUND, no key left),
 * a live run older than the retention stays, a tenant's override longer or shorter than the
 * server's --retention applies, and two servers sweeping at once delete each run once with no
 * error (their counters add up). Runs end by CancelRun (no worker: they are queued, then
 * cancelled by the server); retentions are seconds so the test waits seconds.
 */
import assert from "node:assert/strict";
import { appendFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Stack, sleep, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;
const clients: GrpcRunClient[] = [];
before(async () => {
  stack = await startStack();
  // Overrides: globex keeps runs longer than any server here says, initech shorter.
  appendFileSync(
    stack.authFile,
    "tenants:\n  globex:\n    retention: 1h\n  initech:\n    retention: 2s\n",
  );
  // The stack's own server (retention off) goes: only the servers below sweep. SIGKILL: its
  // graceful shutdown is not what this file tests.
  await stack.server.kill();
});
after(async () => {
  for (const c of clients) c.close();
  await stack?.stop();
});

function clientOf(server: AgentdProcess, token: string): GrpcRunClient {
  const c = new GrpcRunClient(server.addr, token);
  clients.push(c);
  return c;
}

async function endedRun(c: GrpcRunClient): Promise<string> {
  const { run } = await c.createRun({ prompt: "retention" });
  const runId = run?.runId as string;
  await c.cancelRun(runId, "ended for the retention test");
  assert.equal((await c.getRun(runId)).run?.state, RunState.CANCELLED, "the run ended");
  return runId;
}

/** Waits (generously: a loaded machine) until GetRun answers NOT_FOUND for every run. */
async function waitGone(c: GrpcRunClient, runIds: readonly string[], what: string): Promise<void> {
  const left = new Set(runIds);
  for (let i = 0; i < 600 && left.size > 0; i++) {
    for (const id of [...left]) {
      try {
        await c.getRun(id);
      } catch (err) {
        if ((err as { code?: number }).code === grpc.status.NOT_FOUND) left.delete(id);
        else throw err;
      }
    }
    if (left.size > 0) await sleep(200);
  }
  assert.equal(left.size, 0, `waited 120 s for ${what} to be deleted; ${left.size} still there`);
}

/** The keys of the run left in Redis, but the tombstone (it expires by itself). */
async function keysOf(runId: string): Promise<string[]> {
  const keys = await stack.redis.client().keys(`*${runId}*`);
  return keys.filter((k) => !k.endsWith(`run:${runId}:deleted`));
}

async function counter(server: AgentdProcess, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  assert.ok(m, `${name} is exported (at 0 from the start)`);
  return Number(m[1]);
}

const SWEEP = { AGENTD_RETENTION_SWEEP_MS: "300" };

describe("retention (real servers, real Redis)", { timeout: 300_000 }, () => {
  it("ended runs past retention go, live runs stay; two sweepers delete each run once", async () => {
    const env = { ...SWEEP, AGENTD_RETENTION: "3s" };
    const one = await stack.startServer({ env });
    const two = await stack.startServer({ env });
    assert.equal(await counter(one, "agentd_retention_runs_deleted_total"), 0);
    const acme = clientOf(one, TOKENS.acme);
    const globex = clientOf(two, TOKENS.globex);
    const kept = await endedRun(globex); // its tenant says 1h
    const { run } = await acme.createRun({ prompt: "live: queued, never ended" });
    const live = run?.runId as string;
    const ended: string[] = [];
    for (let i = 0; i < 12; i++) ended.push(await endedRun(acme));
    await waitGone(acme, ended, "acme's ended runs (3s retention)");
    for (const id of ended) assert.deepEqual(await keysOf(id), [], `no key of ${id} is left`);
    // One more after them: once it is gone, a sweep has looked at everything ended before it.
    const last = await endedRun(acme);
    await waitGone(acme, [last], "the last acme run");
    assert.equal((await acme.getRun(live)).run?.state, RunState.QUEUED, "a live run is untouched");
    assert.equal(
      (await globex.getRun(kept)).run?.state,
      RunState.CANCELLED,
      "1h override keeps it",
    );
    const deleted =
      (await counter(one, "agentd_retention_runs_deleted_total")) +
      (await counter(two, "agentd_retention_runs_deleted_total"));
    assert.equal(deleted, ended.length + 1, "each run deleted once, across both servers");
    assert.equal(await counter(one, "agentd_retention_sweep_errors_total"), 0);
    assert.equal(await counter(two, "agentd_retention_sweep_errors_total"), 0);
    await acme.cancelRun(live, "done");
    await one.kill();
    await two.kill();
  });

  it("a tenant's retention shorter than the server's applies; the server's holds for the rest", async () => {
    const server = await stack.startServer({ env: { ...SWEEP, AGENTD_RETENTION: "1h" } });
    const acme = clientOf(server, TOKENS.acme);
    const initech = clientOf(server, TOKENS.initech);
    const kept = await endedRun(acme);
    const short = [await endedRun(initech), await endedRun(initech)];
    await waitGone(initech, short, "initech's runs (2s override)");
    const last = await endedRun(initech);
    await waitGone(initech, [last], "the last initech run");
    assert.equal((await acme.getRun(kept)).run?.state, RunState.CANCELLED, "1h server retention");
    await assertGrpcError(initech.getRun(short[0] as string), grpc.status.NOT_FOUND, /not found/);
    await server.kill();
  });
});
