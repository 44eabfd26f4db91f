/**
 * Per-tenant policies in a split deployment: a real `agentd server` and `agentd worker`
 * on a private Redis. The kernel runs in the worker, so the worker reads the auth file's
 * `tenants:` map (its --auth-file) and decides a run of a tenant with its own policy file
 * by that file; a second worker started without the auth file decides the same call by the
 * server's --policy (and says so at start).
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { parseDocument } from "yaml";
import type { PolicyDecision } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { sha256Hex } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { textReply, toolCallsReply } from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

let cluster: Cluster;

before(async () => {
  cluster = await startCluster({
    workers: 0,
    workerFlags: ["--approval-hold-ms", "0"],
    script: ({ body }) =>
      JSON.stringify(body.messages).includes('"role":"tool"')
        ? { chunks: textReply(["done"]) }
        : {
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
          },
  });
});

after(async () => {
  await cluster?.stop();
});

/** The decision of a new run's repo.patch call (the server runs without auth: tenant default). */
async function decisionOf(): Promise<PolicyDecision> {
  const { run } = await cluster.client.createRun({
    prompt: "fix the greeting",
    workspaceTar: await tarOf([{ name: "greet.txt", data: "helo\n" }]),
  });
  const runId = run?.runId as string;
  cluster.track(runId);
  const deadline = Date.now() + 240_000; // a loaded machine starts a sandbox slowly
  while (Date.now() < deadline) {
    const history = cluster.client.streamEvents({ runId, historyOnly: true });
    await history.end(30_000);
    const found = history.events.find((e) => e.payload.case === "policyDecision");
    if (found !== undefined) {
      const { run: now } = await cluster.client.getRun(runId);
      if (
        now !== undefined &&
        ![RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED].includes(now.state)
      )
        await cluster.client.cancelRun(runId, "test done").catch(() => undefined);
      return found.payload.value as PolicyDecision;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`run ${runId}: no policy decision within 240 s\n${cluster.diagnostics()}`);
}

it("a worker with the auth file decides by the tenant's own policy; one without, by the server's", async () => {
  // The tenant's file: the cluster's policy with repo.patch always waiting for approval.
  const doc = parseDocument(readFileSync(cluster.policyFile, "utf8"));
  doc.setIn(["capabilities", "repo.patch", "approval"], "always");
  const own = join(cluster.dir, "default-tenant.yaml");
  writeFileSync(own, doc.toString());
  const auth = join(cluster.dir, "auth.yaml");
  writeFileSync(
    auth,
    `tokens:\n  - { sha256: ${sha256Hex("unused")}, tenant: default, roles: [read] }\ntenants:\n  default: { policy: ${own} }\n`,
  );
  const withAuth = await cluster.startWorker(["--auth-file", auth]);
  assert.equal((await decisionOf()).rule, "capabilities.repo.patch.approval=always");
  assert.match(withAuth.output(), /"msg":"drive uses the tenant's policy"/);
  await withAuth.stop("SIGTERM");
  const without = await cluster.startWorker();
  assert.match(without.output(), /no --auth-file: every tenant's runs use the server's policy/);
  assert.equal((await decisionOf()).rule, "capabilities.repo.patch.approval=risk");
});
