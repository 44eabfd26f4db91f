/**
 * Attack (#28 review, artifactBytes): a tenant's runs store tool output the tenant is never
 * charged for. Real processes: a private redis-server, `agentd server` with an auth file
 * giving tenant "dumper" an artifactBytes limit, one worker, a real sandbox and a stub model
 * whose run calls process.run once with ~600 KB of output.
 *
 * A tool result too large for its event keeps its full output as an artifact
 * (kernel/result-envelope.ts storeFull; `output_digest` in tool.result). The kernel writes it
 * with the worker's RAW artifact store: cmd/agentd/main.ts passes `artifacts` to every
 * createKernel, while only the drive's own writes go through the per-tenant
 * quotaArtifactStore (worker/drive.ts withTenantArtifacts). So tool outputs — up to
 * limits.maxStdout (1 MiB) per call, any number of calls — are stored for the tenant,
 * named by its runs' events, and never counted: artifactBytes does not bind them and
 * agentd_tenant_limit_used{limit="artifactBytes"} under-reports what the tenant stores.
 *
 * What must hold: after the run, the tenant's counted bytes include every blob its run's
 * events name (here: the tool output's), as docs/operations.md promises ("every blob stored
 * for it").
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { sha256Hex } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { type StubRequest, textReply, toolCallsReply } from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

const DUMPER = "dumper-token-0123456789";
const ADMIN = "admin-token-0123456789";
/** Bytes the tool prints: over the 256 KiB a tool.result holds, under maxStdout (1 MiB). */
const OUTPUT = 600_000;

function model(req: StubRequest) {
  const tools = (req.body?.messages ?? []).filter((m: { role: string }) => m.role === "tool");
  if (tools.length === 0)
    return {
      chunks: toolCallsReply([
        {
          id: "call_1",
          name: "process_run",
          arguments: JSON.stringify({ command: `yes dumped-line | head -c ${OUTPUT}` }),
        },
      ]),
    };
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "attack3-tool-output-"));
  const authFile = join(dir, "auth.yaml");
  writeFileSync(
    authFile,
    `tokens:\n  - sha256: ${sha256Hex(DUMPER)}\n    tenant: dumper\n    roles: [submit, read]\n` +
      `  - sha256: ${sha256Hex(ADMIN)}\n    tenant: ops\n    roles: [admin]\n` +
      "tenants:\n  dumper:\n    limits:\n      artifactBytes: 64MiB\n",
  );
  c = await startCluster({
    workers: 1,
    concurrency: 1,
    script: model,
    serverFlags: ["--auth-file", authFile],
  });
});
after(async () => {
  await c?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 240_000) {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what} (${String(last)})\n${c.diagnostics()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function usedBytes(): Promise<number | undefined> {
  const text = await (
    await fetch(`${c.server.url}/metrics/tenants`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    })
  ).text();
  const line = text
    .split("\n")
    .find(
      (l) =>
        l.startsWith("agentd_tenant_limit_used{") &&
        l.includes('tenant="dumper"') &&
        l.includes('limit="artifactBytes"'),
    );
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

it("a run's stored tool output is counted in its tenant's artifactBytes", {
  timeout: 400_000,
}, async () => {
  const workspaceTar = await tarOf([{ name: "a.txt", data: "a\n" }]);
  const { run } = await c.client.createRun({ prompt: "dump", workspaceTar }, DUMPER);
  assert.ok(run !== undefined);
  c.track(run.runId);
  await until(`run ${run.runId} ended`, async () => {
    const r = (await c.client.getRun(run.runId, DUMPER)).run;
    return r !== undefined && r.state >= RunState.COMPLETED ? r : undefined;
  });
  // The blobs the run's events name, and their sizes as stored.
  let named = 0;
  const digests: string[] = [];
  for (const ev of await c.log.read(run.runId, 0)) {
    const p = ev.event.payload;
    if (p.case === "toolResult" && p.value.outputDigest !== "") digests.push(p.value.outputDigest);
    if (p.case === "runQueued") named += Number(p.value.workspaceSizeBytes);
  }
  assert.equal(digests.length, 1, "the tool's full output was stored as an artifact");
  const store = new FsArtifactStore(c.artifactDir);
  for (const d of digests) {
    const info = await store.stat(d);
    assert.ok(info !== undefined, `the tool output ${d} is stored`);
    named += info.size;
  }
  const used = await until("dumper's artifactBytes gauge", usedBytes);
  assert.ok(
    used >= named,
    `dumper's runs store ${digests.length} tool-output blob(s) plus the workspace (${named} bytes), yet artifactBytes counts ${used} bytes`,
  );
});
