/**
 * A run's container lost under real processes: a private redis-server, an `agentd server`,
 * two `agentd worker`s (policy `sandbox.onLost: continue`), real containers. The run patches
 * a.txt and writes made.txt with a command; then its container is killed (`docker kill`,
 * or `docker stop`) while the model thinks. The worker whose call then fails finds the
 * container lost and lets the run go; a worker claims it again, recovers the workspace and
 * records `sandbox.lost`; the model, told, redoes the command. By effect: the completed
 * run's patch holds both changes, the log is healthy, and no container is left.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, payloads, type RunWatch } from "../testing/run-watch.ts";

const call = (id: string, tool: string, args: unknown): StubReply => ({
  chunks: toolCallsReply([{ id, name: tool.replace(".", "_"), arguments: JSON.stringify(args) }]),
});

/** Run ids by prompt key, and the keys whose container was lost. */
const runs = new Map<string, string>();
const lostKeys = new Set<string>();
let c: Cluster;
let w: RunWatch;

async function model({ body }: StubRequest): Promise<StubReply> {
  const messages = (body?.messages ?? []) as { role: string; content?: unknown }[];
  const all = JSON.stringify(messages);
  const m = /chaos-lost(kill|stop)-[0-9a-z]+/.exec(all);
  if (m === null) return { status: 500, body: { error: { message: "stub: no script" } } };
  const key = m[0];
  const how = m[1] as "kill" | "stop";
  const n = messages.filter((m) => m.role === "tool").length;
  if (all.includes("sandbox container was lost"))
    return all.includes("call_4")
      ? { chunks: textReply(["redone"]) }
      : call("call_4", "process.run", { command: "echo made > made.txt" });
  if (n === 0)
    return call("call_1", "repo.patch", {
      path: "a.txt",
      edits: [{ oldText: "a", newText: "patched" }],
    });
  if (n === 1) return call("call_2", "process.run", { command: "echo made > made.txt" });
  if (n === 2 && !lostKeys.has(key)) {
    // The test learns the run's id from CreateRun's answer: long before this third step.
    let run = runs.get(key);
    for (let i = 0; i < 600 && run === undefined; i++) {
      await new Promise((r) => setTimeout(r, 50));
      run = runs.get(key);
    }
    assert.ok(run !== undefined, `run of ${key} known within 30 s`);
    const ids = await c.containersOf(run);
    for (const id of ids) {
      const box = c.docker.getContainer(id);
      await (how === "kill" ? box.kill() : box.stop({ t: 2 }));
    }
    assert.equal(ids.length, 1, "the run had one container to lose");
    lostKeys.add(key);
  }
  if (n === 2) return call("call_3", "process.run", { command: "cat a.txt" });
  return { chunks: textReply(["done"]) };
}

before(async () => {
  c = await startCluster({
    workers: 2,
    leaseTtlMs: 3000,
    script: model,
    policy: [[["sandbox", "onLost"], "continue"]],
  });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
});

for (const how of ["kill", "stop"] as const) {
  it(`docker ${how} mid-run: the run is recovered by a worker, the model redoes what was lost, the patch holds every change`, {
    timeout: 180_000,
  }, async () => {
    // The prompt is chaos-KIND-NONCE: the key is known only once the run exists.
    const kind = `lost${how}`;
    const s = await w.submit(kind);
    const key = (await c.log.read(s.runId, 0))
      .map((e) => e.event.payload)
      .flatMap((p) => (p.case === "runQueued" ? [p.value.prompt] : []))[0];
    assert.ok(key !== undefined);
    runs.set(key, s.runId);
    const events = await w.assertHealthy(s.runId);
    assert.ok(lostKeys.has(key), "the container was lost during the run");
    const lost = payloads(events, "sandboxLost");
    assert.equal(lost.length, 1, "one sandbox.lost");
    assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
    assert.deepEqual(lost[0]?.lostCallIds, ["call_2"]);
    const done = payloads(events, "runCompleted")[0];
    assert.ok(done !== undefined && done.patchDigest !== "");
    const parts: Uint8Array[] = [];
    for await (const chunk of new FsArtifactStore(c.artifactDir).read(done.patchDigest))
      parts.push(chunk);
    const patch = Buffer.concat(parts).toString("utf8");
    assert.match(patch, /^\+patched$/m, "the re-applied repo.patch is in the patch");
    assert.match(patch, /^\+made$/m, "the model's redo of the lost command is in the patch");
  });
}
