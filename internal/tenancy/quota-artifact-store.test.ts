/**
 * A run's artifact store under its tenant's artifactBytes, on a real filesystem store: writes
 * are charged once per blob; the write that crosses the limit is stored and the next one is
 * refused with ELIMIT_ARTIFACTS naming the limit (only once per drive); without a limit
 * nothing is refused; reads are never refused.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { AgentdError } from "../errors.ts";
import { MemoryArtifactLedger } from "./memory-artifact-bytes.ts";
import { quotaArtifactStore } from "./quota-artifact-store.ts";

const dir = mkdtempSync(join(tmpdir(), "quota-store-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const base = new FsArtifactStore(dir);

it("charges once per blob, stores the crossing write, refuses the next naming the limit", async () => {
  const ledger = new MemoryArtifactLedger();
  const store = quotaArtifactStore(base, { tenantId: "t", ledger, limitOf: async () => 100 });
  const a = await store.put(Buffer.alloc(60, 1));
  await store.put(Buffer.alloc(60, 1)); // the same blob: counted once
  assert.equal(await ledger.bytesOf("t"), 60);
  const b = await store.put(Buffer.alloc(60, 2)); // crosses the limit: stored
  assert.ok(await base.stat(b.digest));
  assert.equal(await ledger.bytesOf("t"), 120);
  const refused = await store.put(Buffer.alloc(10, 3)).then(
    () => assert.fail("a write over the limit must be refused"),
    (e: unknown) => e,
  );
  assert.ok(refused instanceof AgentdError && refused.code === "ELIMIT_ARTIFACTS");
  assert.match(refused.message, /^tenant limit artifactBytes: tenant t stores 120 of its 100 /);
  assert.match(refused.message, /tenants\.t\.limits\.artifactBytes/);
  const refusedDigest = createHash("sha256").update(Buffer.alloc(10, 3)).digest("hex");
  assert.equal(await base.stat(refusedDigest), undefined, "the refused write stored nothing");
  // What the failure itself records is stored; reads go on.
  await store.put(Buffer.alloc(10, 4));
  assert.equal((await store.stat(a.digest))?.size, 60);
});

it("without a limit nothing is refused, and use is still counted", async () => {
  const ledger = new MemoryArtifactLedger();
  const store = quotaArtifactStore(base, {
    tenantId: "u",
    ledger,
    limitOf: async () => undefined,
  });
  for (let i = 0; i < 5; i++) await store.put(Buffer.alloc(100, 10 + i));
  assert.equal(await ledger.bytesOf("u"), 500);
});
