/**
 * Attack tests for issue #28 (deletion, retention, archives, tenants, rate limits), against a
 * real `agentd server` on a private redis-server (internal/testing/api-fixtures.ts). Each
 * test states the attack and asserts what must hold; they FAIL on main at 83a64c0.
 *
 * 1. /metrics needs no token and promises "no run id, tenant id" (docs/observability.md),
 *    but the per-tenant rate-limit counter primes a series for every tenant of the auth
 *    file: anyone who reaches the API port lists every customer's tenant id.
 * 2. A tenant's uploaded workspace (its UploadWorkspace receipt, waiting for CreateRun's
 *    workspace_digest) is destroyed by ANOTHER tenant deleting a run whose workspace has the
 *    same content: the deletion removes the blob (no event names it), the victim's receipt
 *    stays, and the victim's CreateRun answers NOT_FOUND.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ulid } from "ulid";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { tarOf } from "../testing/tar.ts";

let s: Stack;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.stop();
});

function api() {
  return createClient(RunService, createGrpcTransport({ baseUrl: s.server.url }));
}
const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

/** Whether the server's artifact directory holds the blob (fs store: `sha256/<2 hex>/<digest>`). */
function blobExists(digest: string): boolean {
  return existsSync(join(s.dir, "artifacts", "sha256", digest.slice(0, 2), digest));
}

describe("issue #28 attacks", { timeout: 240_000 }, () => {
  it("unauthenticated GET /metrics names no tenant id of the auth file", async () => {
    const res = await fetch(`${s.server.url}/metrics`);
    assert.equal(res.status, 200);
    const body = await res.text();
    const leaked = ["acme", "globex", "initech"].filter((t) => body.includes(`tenant="${t}"`));
    assert.deepEqual(
      leaked,
      [],
      `an unauthenticated scrape lists tenant ids: ${body
        .split("\n")
        .filter((l) => /tenant="/.test(l))
        .join(" | ")}`,
    );
  });

  it("another tenant's DeleteRun does not destroy a workspace this tenant uploaded and holds a receipt for", async () => {
    const c = api();
    // The same repository snapshot, uploaded by two tenants (a public repo: the same bytes).
    const tar = await tarOf([{ name: "README.md", data: `shared ${ulid()}\n` }]);
    // Victim (globex) uploads now, to create its run later with workspace_digest.
    async function* chunks() {
      yield { chunk: new Uint8Array(tar) };
    }
    const up = await c.uploadWorkspace(chunks(), as(TOKENS.globex));
    assert.match(up.digest, /^[0-9a-f]{64}$/);
    // Attacker (acme) runs on the same content, ends the run (cancelled while queued), deletes it.
    const { run } = await c.createRun({ prompt: "x", workspaceTar: tar }, as(TOKENS.acme));
    assert.ok(run);
    assert.equal(run.workspaceDigest, up.digest, "same content, same digest");
    const cancelled = await c.cancelRun({ runId: run.runId }, as(TOKENS.acme));
    assert.equal(cancelled.run?.state, RunState.CANCELLED);
    await c.deleteRun({ runId: run.runId, reason: "cleanup" }, as(TOKENS.acme));
    // The victim's receipted upload must still be usable.
    assert.ok(blobExists(up.digest), `globex's uploaded workspace ${up.digest} was removed`);
    const created = await c
      .createRun({ prompt: "mine", workspaceDigest: up.digest }, as(TOKENS.globex))
      .then(
        (r) => r,
        (e: unknown) => ConnectError.from(e),
      );
    assert.ok(
      !(created instanceof ConnectError),
      `globex's CreateRun with its own uploaded digest failed: ${created instanceof ConnectError ? `${Code[created.code]} ${created.rawMessage}` : ""}`,
    );
  });
});
