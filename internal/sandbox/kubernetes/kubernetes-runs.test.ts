/**
 * Whole runs on the kubernetes driver, against real processes: a private redis-server, an
 * `agentd server` and two `agentd worker --sandbox-driver kubernetes` on the test cluster
 * (scripts/kubernetes/cluster.sh). A run completes with its patch and its Pod goes; a run
 * whose worker is SIGKILLed mid-call is taken over by the other worker, which finds the
 * same Pod (same uid: the workspace survived) and finishes the run with the call answered
 * `interrupted`, run once.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../../artifacts/fs-artifact-store.ts";
import type { Event } from "../../gen/agentd/v1/events_pb.js";
import { RunState } from "../../gen/agentd/v1/run_service_pb.js";
import { type Cluster, startCluster } from "../../testing/cluster.ts";
import { sandboxImage } from "../../testing/docker.ts";
import {
  loadImages,
  requireCluster,
  type TestNamespace,
  testNamespace,
} from "../../testing/kubernetes.ts";
import { type StubRequest, textReply, toolCallsReply } from "../../testing/openai-stub.ts";
import { createRunWatch, payloads, type RunWatch } from "../../testing/run-watch.ts";
import { podName } from "./pod-manifest.ts";

const CALLS = {
  write: "echo written > out.txt",
  sleep: "echo added >> notes.txt && echo appended && sleep 60",
} as const;

/** One process_run chosen by the prompt's kind; once answered, the model stops. */
function model({ body }: StubRequest) {
  const messages = (body?.messages ?? []) as { role: string }[];
  const kind = /chaos-(write|sleep)-/.exec(JSON.stringify(messages))?.[1] as
    | keyof typeof CALLS
    | undefined;
  if (kind === undefined) return { status: 500, body: { error: { message: "stub: no script" } } };
  if (messages.some((m) => m.role === "tool")) return { chunks: textReply(["Done."]) };
  const args = JSON.stringify({ command: CALLS[kind], timeoutMs: 120_000 });
  return { chunks: toolCallsReply([{ id: "call_1", name: "process_run", arguments: args }]) };
}

let ns: TestNamespace;
let c: Cluster;
let w: RunWatch;

before(async () => {
  ns = await testNamespace("baseline");
  await loadImages(sandboxImage("test"));
  c = await startCluster({
    workers: 2,
    leaseTtlMs: 3000,
    script: model,
    env: { KUBECONFIG: await requireCluster() },
    workerFlags: [
      "--sandbox-driver",
      "kubernetes",
      "--k8s-namespace",
      ns.namespace,
      "--warm-sandboxes",
      "0",
    ],
  });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
  await ns?.cleanup();
});

async function patchOf(events: Event[]): Promise<string> {
  const done = payloads(events, "runCompleted")[0];
  assert.ok(done !== undefined && done.patchDigest !== "", "the run left a patch");
  const parts: Uint8Array[] = [];
  for await (const p of new FsArtifactStore(c.artifactDir).read(done.patchDigest)) parts.push(p);
  return Buffer.concat(parts).toString("utf8");
}

const podOf = (runId: string) =>
  ns.core.readNamespacedPod({ namespace: ns.namespace, name: podName("agentd", runId) }).then(
    (p) => p,
    () => undefined,
  );

it("a run completes in a Pod of its own, and its Pod goes with it", {
  timeout: 240_000,
}, async () => {
  const s = await w.submit("write");
  await w.waitEvent(s, "toolStarted", (t) => t.callId === "call_1");
  const pod = await podOf(s.runId);
  assert.ok(pod !== undefined, "the run's Pod exists while it runs");
  assert.equal(pod.spec?.automountServiceAccountToken, false);
  const run = await w.waitTerminal(s.runId);
  assert.equal(run.state, RunState.COMPLETED, RunState[run.state]);
  const events = await w.assertHealthy(s.runId);
  assert.match(await patchOf(events), /\+\+\+ b\/out\.txt\n@@.*\n\+written/);
  await w.until(`the Pod of run ${s.runId} to go`, async () =>
    (await podOf(s.runId)) === undefined ? true : undefined,
  );
  s.stream.cancel();
});

it("a worker SIGKILLed mid-call: the other takes the run over in the same Pod", {
  timeout: 240_000,
}, async () => {
  const s = await w.submit("sleep", [{ name: "notes.txt", data: "first\n" }]);
  const started = await w.waitEvent(s, "toolStarted", (t) => t.callId === "call_1");
  await w.waitEvent(s, "toolOutput", (o) => o.callId === "call_1" && o.chunk.includes("appended"));
  const uid = (await podOf(s.runId))?.metadata?.uid;
  assert.ok(uid !== undefined);
  const owner = c.workerOf(started.workerId);
  assert.ok(owner !== undefined);
  await owner.kill();
  const run = await w.waitTerminal(s.runId);
  assert.equal(run.state, RunState.COMPLETED, RunState[run.state]);
  const events = await w.assertHealthy(s.runId);
  const result = payloads(events, "toolResult").find((r) => r.callId === "call_1");
  assert.equal(result?.error?.code, "interrupted", "the call is answered, not run again");
  const added = (await patchOf(events))
    .split("\n")
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"));
  assert.deepEqual(added, ["+added"], "the workspace of the Pod survived: the line is there once");
  const recovered = payloads(events, "sandboxLost");
  assert.equal(
    recovered.length,
    0,
    `the same Pod (uid ${uid}) was taken over, not a new workspace`,
  );
  s.stream.cancel();
});
