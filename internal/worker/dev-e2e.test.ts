/**
 * `agentd dev` end to end: the real process (server, worker, embedded log, Docker sandbox)
 * runs an agent against a scripted OpenAI-compatible model; the patch artifact is served by
 * GetArtifact; after a restart, runs that were queued while no model was configured run.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { sandboxImage } from "../testing/docker.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

let dir: string;
let stub: OpenAiStub;
let policyFile: string;
const procs: AgentdProcess[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-deve2e-"));
  // The model: fix the file on the first request of a run, then say it is done.
  stub = await startOpenAiStub(({ body }) => {
    const msgs = JSON.stringify(body.messages);
    if (!msgs.includes('"role":"tool"')) {
      return {
        chunks: toolCallsReply([
          {
            id: "c1",
            name: "repo_patch",
            arguments: JSON.stringify({
              path: "greet.txt",
              edits: [{ oldText: "helo", newText: "hello" }],
            }),
          },
        ]),
      };
    }
    return { chunks: textReply(["Fixed the typo in greet.txt."]) };
  });
  const policy = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")), "the test policy uses the test image");
  policyFile = join(dir, "policy.yaml");
  writeFileSync(policyFile, policy);
});
after(async () => {
  for (const p of procs) await p.stop("SIGKILL").catch(() => undefined);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function dev(withModel: boolean): Promise<AgentdProcess> {
  const p = await startAgentd("dev", ["--data-dir", join(dir, "data"), "--policy", policyFile], {
    env: withModel ? { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } : {},
  });
  procs.push(p);
  return p;
}

async function waitDone(client: GrpcRunClient, runId: string) {
  for (let i = 0; i < 400; i++) {
    const { run } = await client.getRun(runId);
    if (run && [RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED].includes(run.state))
      return run;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`run ${runId} did not end`);
}

it("runs an agent in a sandbox and serves its patch", async () => {
  const p = await dev(true);
  const client = new GrpcRunClient(p.addr);
  try {
    const { run } = await client.createRun({
      prompt: "fix the greeting",
      workspaceTar: await tarOf([{ name: "greet.txt", data: "helo\n" }]),
    });
    const done = await waitDone(client, run?.runId as string);
    assert.equal(done.state, RunState.COMPLETED, done.error?.message);
    assert.equal(done.summary, "Fixed the typo in greet.txt.");
    const parts: Uint8Array[] = [];
    await new Promise<void>((resolve, reject) => {
      const m = RunService.method.getArtifact;
      const call = client.serverStream(m, { runId: done.runId, name: "patch" });
      call.on("data", (r: { part: { case: string; value: Uint8Array } }) => {
        if (r.part.case === "chunk") parts.push(r.part.value);
      });
      call.on("end", () => resolve());
      call.on("error", reject);
    });
    assert.match(Buffer.concat(parts).toString("utf8"), /-helo\n\+hello/);
  } finally {
    client.close();
    await p.stop("SIGTERM");
  }
});

it("queues runs again after a restart: a run created without a model runs once one is configured", async () => {
  const off = await dev(false);
  const c1 = new GrpcRunClient(off.addr);
  const { run } = await c1.createRun({
    prompt: "fix the greeting later",
    workspaceTar: await tarOf([{ name: "greet.txt", data: "helo\n" }]),
  });
  const second = await c1.createRun({
    prompt: "and then this",
    sessionId: run?.sessionId as string,
  });
  await new Promise((r) => setTimeout(r, 300));
  const first = (await c1.getRun(run?.runId as string)).run;
  assert.equal(first?.state, RunState.QUEUED, "no model: it waits");
  assert.equal(first?.sessionPosition, 1);
  const behind = (await c1.getRun(second.run?.runId as string)).run;
  assert.equal(behind?.sessionPosition, 2, "the session's later run waits behind the first");
  assert.equal(behind?.queuePosition, 2);
  await c1.cancelRun(second.run?.runId as string, "not needed");
  c1.close();
  assert.equal((await off.stop("SIGTERM")).code, 0);
  const on = await dev(true);
  const c2 = new GrpcRunClient(on.addr);
  try {
    const done = await waitDone(c2, run?.runId as string);
    assert.equal(done.state, RunState.COMPLETED, done.error?.message);
  } finally {
    c2.close();
    await on.stop("SIGTERM");
  }
});
