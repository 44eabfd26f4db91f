/**
 * artifactBytes on the embedded log (`--event-log file:`) survive a restart: the count lives
 * in the process, so the server counts it again from the stored runs and upload receipts at
 * start (tenancy/rebuild-artifact-bytes.ts). Before, a restart answered 0 and the tenant could
 * store its limit again. Real `agentd server` processes on one data directory.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import { tarOf } from "../testing/tar.ts";
import { tenantMetric } from "../testing/tenant-metrics.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-artbytes-"));
const ADMIN = "tok-admin-artbytes";
const HOARDER = "tok-hoarder-artbytes";
let server: AgentdProcess | undefined;

after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function start(): Promise<AgentdProcess> {
  const auth = join(dir, "auth.yaml");
  writeFileSync(
    auth,
    [
      "tokens:",
      `  - sha256: ${sha256Hex(HOARDER)}\n    tenant: hoarder\n    roles: [submit, read]`,
      `  - sha256: ${sha256Hex(ADMIN)}\n    tenant: ops\n    roles: [admin]`,
      "tenants:\n  hoarder:\n    limits:\n      artifactBytes: 1MiB\n",
    ].join("\n"),
  );
  return startAgentd("server", [
    ...["--event-log", `file:${join(dir, "log")}`, "--artifact-dir", join(dir, "artifacts")],
    ...["--auth-file", auth],
  ]);
}

const used = (s: AgentdProcess) =>
  tenantMetric(s.url, ADMIN, "agentd_tenant_limit_used", "hoarder", "artifactBytes");

it("the tenant's stored bytes (an upload's receipt and a queued run's workspace) are the same after a restart", {
  timeout: 180_000,
}, async () => {
  server = await start();
  const client = new GrpcRunClient(server.addr, HOARDER);
  const up = await client.uploadWorkspace([
    await tarOf([{ name: "up.txt", data: `uploaded ${ulid()}\n${"u".repeat(2000)}` }]),
  ]);
  const workspaceTar = await tarOf([{ name: "run.txt", data: `inline ${ulid()}\n` }]);
  const { run } = await client.createRun({ prompt: "p", workspaceTar });
  assert.ok(run !== undefined);
  const inline = await new FsArtifactStore(join(dir, "artifacts")).stat(run.workspaceDigest);
  assert.ok(inline !== undefined && Number(up.sizeBytes) > 2000);
  const expected = Number(up.sizeBytes) + inline.size;
  assert.equal(await used(server), expected, "both blobs counted before the restart");
  client.close();
  await server.stop();
  server = await start();
  assert.equal(await used(server), expected, "and counted again after it");
});
