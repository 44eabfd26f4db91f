/**
 * Every acknowledged run starts in `agentd dev` too (embedded log, in-process queue,
 * sequential-run-admission.ts): the real process SIGKILLs itself at a point of CreateRun
 * (AGENTD_TEST_CRASH_AT), starts again, and the retry with the same idempotency key gets a
 * run that its worker drives to COMPLETED; exactly one run exists for the key.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { ulid } from "ulid";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { sandboxImage } from "../testing/docker.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import { type OpenAiStub, startOpenAiStub, textReply } from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

/** A retry may wait out the dead request's idempotency claim (30 s). */
const CAP_MS = 180_000;

let dir: string;
let stub: OpenAiStub;
let policyFile: string;
let workspaceTar: Uint8Array;
const procs: AgentdProcess[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-devfaults-"));
  stub = await startOpenAiStub(() => ({ chunks: textReply(["done"]) }));
  const policy = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")), "the test policy uses the test image");
  policyFile = join(dir, "policy.yaml");
  writeFileSync(policyFile, policy);
  workspaceTar = await tarOf([{ name: "a.txt", data: "a\n" }]);
});
after(async () => {
  for (const p of procs) await p.stop("SIGKILL").catch(() => undefined);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function dev(env: Record<string, string> = {}): Promise<AgentdProcess> {
  const p = await startAgentd("dev", ["--data-dir", join(dir, "data"), "--policy", policyFile], {
    env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL, ...env },
  });
  procs.push(p);
  return p;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + CAP_MS;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${String(last)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const [point, label] of [
  ["createRun.afterClaim", "dev-after-claim"],
  ["createRun.afterAdmit", "dev-after-admit"],
] as const) {
  it(`agentd dev SIGKILLed at ${point}: after a restart the retry's run completes, once`, {
    timeout: 2 * CAP_MS + 120_000,
  }, async () => {
    const key = `k-${ulid()}`;
    const request = {
      prompt: `create-${label}`,
      workspaceTar,
      idempotencyKey: key,
      labels: { fault: label },
    };
    const dying = await dev({ AGENTD_TEST_CRASH_AT: point });
    const c1 = new GrpcRunClient(dying.addr);
    await assert.rejects(c1.createRun(request), "the dying process answers nothing");
    c1.close();
    assert.equal((await dying.exited).signal, "SIGKILL", `it died at ${point}\n${dying.output()}`);
    const p = await dev();
    const client = new GrpcRunClient(p.addr);
    try {
      const runId = await until(
        "the retry to answer a run",
        async () => (await client.createRun(request)).run?.runId,
      );
      const run = await until(`run ${runId} to end`, async () => {
        const r = (await client.getRun(runId)).run;
        return r !== undefined &&
          [RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED].includes(r.state)
          ? r
          : undefined;
      });
      assert.equal(run.state, RunState.COMPLETED, run.error?.message);
      const listed = await client.listRuns({ labelSelector: `fault=${label}`, pageSize: 10 });
      assert.deepEqual(
        listed.runs.map((r) => r.runId),
        [runId],
        "exactly one run for the key",
      );
    } finally {
      client.close();
      await p.stop();
    }
  });
}
