/**
 * `--artifact-store redis` end to end: a server and a worker that share no directory (each
 * has its own --artifact-dir, which stays empty). The worker reads the workspace the server
 * stored at CreateRun, and the server serves the patch the worker stored.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { type StubRequest, textReply, toolCallsReply } from "../testing/openai-stub.ts";
import { createRunWatch, payloads } from "../testing/run-watch.ts";

const serverDir = mkdtempSync(join(tmpdir(), "agentd-art-server-"));
const workerDir = mkdtempSync(join(tmpdir(), "agentd-art-worker-"));
let c: Cluster;

function model({ body }: StubRequest) {
  const n = ((body?.messages ?? []) as { role: string }[]).filter((m) => m.role === "tool").length;
  if (n === 0)
    return {
      chunks: toolCallsReply([
        {
          id: "call_1",
          name: "process_run",
          arguments: JSON.stringify({ command: "cat a.txt; echo changed >> a.txt" }),
        },
      ]),
    };
  return { chunks: textReply(["changed a.txt"]) };
}

before(async () => {
  c = await startCluster({
    workers: 1,
    serverFlags: ["--artifact-store", "redis", "--artifact-dir", serverDir],
    workerFlags: ["--artifact-store", "redis", "--artifact-dir", workerDir],
    script: model,
  });
});

after(async () => {
  await c?.stop();
  rmSync(serverDir, { recursive: true, force: true });
  rmSync(workerDir, { recursive: true, force: true });
});

it("the workspace goes server → worker and the patch worker → server through Redis", async () => {
  const w = createRunWatch(c);
  const s = await w.submit("redis-artifacts", [{ name: "a.txt", data: "original\n" }]);
  const events = await w.assertHealthy(s.runId);
  const out = payloads(events, "toolResult")[0]?.outputJson ?? "";
  assert.match(out, /original/, "the worker read the uploaded workspace");
  const done = payloads(events, "runCompleted")[0];
  assert.ok(done?.patchDigest, "a patch");
  const call = c.client.serverStream(RunService.method.getArtifact, {
    runId: s.runId,
    name: "patch",
  });
  const parts: Buffer[] = [];
  for await (const m of call as AsyncIterable<{ part: { case?: string; value?: unknown } }>)
    if (m.part.case === "chunk") parts.push(Buffer.from(m.part.value as Uint8Array));
  const patch = Buffer.concat(parts).toString("utf8");
  assert.match(patch, /\+changed/, patch);
  for (const dir of [serverDir, workerDir])
    assert.deepEqual(
      readdirSync(dir).filter((f) => f !== "tmp"),
      [],
      `${dir} holds no blob`,
    );
  const keys = await c.redis.client().keys("agentd:artifact:*");
  assert.ok(
    keys.some((k) => k.endsWith(`:${done.patchDigest}`)),
    "the patch is in Redis",
  );
});
