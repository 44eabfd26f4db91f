/**
 * Attack (#28 review, artifactBytes bookkeeping), against a real `agentd server` on a
 * private redis-server (internal/testing/api-fixtures.ts):
 *
 * 1. A tenant at its runsPerMinute limit whose client retries CreateRun with an inline
 *    `workspace_tar` (RESOURCE_EXHAUSTED, "retry after …": exactly what a client does) is
 *    charged the workspace's bytes for every refused call. api/create-run.ts charges
 *    `tenantArtifacts` right after storing the inline workspace, before `admit` runs the
 *    tenant gate; the refusal then drops the hold (lifecycle/expire-receipts.ts releaseHold,
 *    which removes the unreferenced blob) but never releases the charge. No run and no
 *    receipt names the blob, so no DeleteRun, retention pass or receipt expiry ever gives
 *    the bytes back: the count only grows until every run of the tenant fails with
 *    ELIMIT_ARTIFACTS, and `agentd_tenant_limit_used{limit="artifactBytes"}` lies.
 *    Must hold: once every run of the tenant is deleted, the tenant stores 0 bytes.
 *
 * 2. PurgeTenant records `tenant.purged`, yet the tenant's uploaded workspaces (live upload
 *    receipts: api/upload-workspace.ts) stay stored, counted and usable by the purged
 *    tenant's token for up to --upload-receipt-ttl (30 d max): api/purge-tenant.ts deletes
 *    runs only and never drops the tenant's receipts (lifecycle/port.ts UploadReceiptRefs
 *    has no per-tenant drop). Must hold: after a purge nothing the tenant stored remains.
 */
import assert from "node:assert/strict";
import { appendFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ulid } from "ulid";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { tarOf } from "../testing/tar.ts";

let s: Stack;
let server: AgentdProcess;
before(async () => {
  s = await startStack();
  // acme: one CreateRun a minute, and an artifactBytes limit (so its use is counted).
  appendFileSync(
    s.authFile,
    "tenants:\n  acme:\n    limits:\n      runsPerMinute: 1\n      artifactBytes: 64MiB\n",
  );
  server = await s.startServer();
});
after(async () => {
  await s?.stop();
});

function api() {
  return createClient(RunService, createGrpcTransport({ baseUrl: server.url }));
}
const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
const storedBytes = async (tenant: string) =>
  Number((await s.redis.client().get(`agentd:tenant:${tenant}:artifact-bytes`)) ?? 0);
const blobExists = (digest: string) =>
  existsSync(join(s.dir, "artifacts", "sha256", digest.slice(0, 2), digest));

describe("artifactBytes bookkeeping", { timeout: 240_000 }, () => {
  it("a CreateRun refused by runsPerMinute charges nothing that outlives the tenant's runs", async () => {
    const c = api();
    const admitted: string[] = [];
    let refused = 0;
    // Until two calls in a row were refused (a minute boundary may admit one more).
    for (let i = 0; i < 8 && refused < 2; i++) {
      const tar = await tarOf([{ name: "big.txt", data: `${i} ${ulid()} `.repeat(20_000) }]);
      try {
        const r = await c.createRun({ prompt: `retry ${i}`, workspaceTar: tar }, as(TOKENS.acme));
        admitted.push(r.run?.runId ?? "");
        refused = 0;
      } catch (e) {
        const err = ConnectError.from(e);
        assert.equal(err.code, Code.ResourceExhausted, err.rawMessage);
        assert.match(err.rawMessage, /runsPerMinute/);
        refused++;
      }
    }
    assert.equal(refused, 2, "the tenant's minute was full");
    for (const runId of admitted) {
      const cancelled = await c.cancelRun({ runId, reason: "done" }, as(TOKENS.acme));
      assert.equal(cancelled.run?.state, RunState.CANCELLED);
      await c.deleteRun({ runId, reason: "cleanup" }, as(TOKENS.acme));
    }
    assert.equal(
      await storedBytes("acme"),
      0,
      "every run of acme is deleted and it holds no upload, yet the refused CreateRuns' workspaces are still counted against its artifactBytes",
    );
  });

  it("PurgeTenant leaves nothing of the tenant's uploads: not stored, not usable, not counted", async () => {
    const c = api();
    const tar = await tarOf([{ name: "repo.txt", data: `globex private ${ulid()}\n` }]);
    async function* chunks() {
      yield { chunk: new Uint8Array(tar) };
    }
    const up = await c.uploadWorkspace(chunks(), as(TOKENS.globex));
    assert.ok(blobExists(up.digest));
    const purge = c.purgeTenant({ tenantId: "globex", reason: "customer left" }, as(TOKENS.acme));
    let done = false;
    for await (const p of purge) done ||= p.done;
    assert.ok(done, "the purge ended");
    const left: string[] = [];
    if (blobExists(up.digest)) left.push(`the uploaded workspace ${up.digest} is still stored`);
    const n = await storedBytes("globex");
    if (n !== 0) left.push(`globex still counts ${n} stored bytes`);
    const reuse = await c
      .createRun({ prompt: "after purge", workspaceDigest: up.digest }, as(TOKENS.globex))
      .then(
        (r) => `CreateRun with the purged upload made run ${r.run?.runId}`,
        () => "",
      );
    if (reuse !== "") left.push(reuse);
    assert.deepEqual(left, [], "a purged tenant's data outlives the purge");
  });
});
