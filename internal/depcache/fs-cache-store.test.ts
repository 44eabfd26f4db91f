/**
 * The dependency cache store on a real directory: an entry per tenant and key, tenants
 * apart (same key, different content), least-recently-used eviction past the bound,
 * archives past the bound refused, hostile keys and digests refused, a corrupt blob not
 * served.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { createFsCacheStore } from "./fs-cache-store.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-depcache-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const key = (s: string) => createHash("sha256").update(s).digest("hex");
const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

it("keeps tenants apart: the same key holds each tenant's own archive", async () => {
  const store = createFsCacheStore({ dir: join(dir, "a"), maxBytes: 1 << 20 });
  await store.save("acme", key("k"), bytes(100, 1), "run_a");
  assert.equal(await store.lookup("globex", key("k")), undefined);
  const a = await store.lookup("acme", key("k"));
  assert.equal(a?.savedBy, "run_a");
  assert.equal(a?.size, 100);
  assert.equal(await store.read("globex", a?.digest ?? ""), undefined, "no cross-tenant read");
  await store.save("globex", key("k"), bytes(50, 2), "run_g");
  const g = await store.lookup("globex", key("k"));
  assert.notEqual(g?.digest, a?.digest);
  assert.deepEqual(await store.read("acme", a?.digest ?? ""), Buffer.from(bytes(100, 1)));
  assert.equal(readdirSync(join(dir, "a")).length, 2, "one folder per tenant");
  for (const name of readdirSync(join(dir, "a"))) assert.match(name, /^[0-9a-f]{64}$/);
});

it("evicts the least recently used entries past the bound, never the one just saved", async () => {
  let t = 1_000_000;
  const store = createFsCacheStore({ dir: join(dir, "b"), maxBytes: 250, now: () => (t += 1000) });
  await store.save("acme", key("1"), bytes(100, 1), "r1");
  await store.save("acme", key("2"), bytes(100, 2), "r2");
  await store.lookup("acme", key("1")); // 1 is now more recent than 2
  const third = await store.save("acme", key("3"), bytes(100, 3), "r3");
  assert.deepEqual(third.evicted, [key("2")]);
  assert.equal(await store.lookup("acme", key("2")), undefined);
  assert.ok(await store.lookup("acme", key("1")));
  assert.ok(await store.lookup("acme", key("3")));
  // The evicted archive is gone from the disk too.
  const blobs = readdirSync(join(dir, "b", readdirSync(join(dir, "b"))[0] as string, "blobs"));
  assert.equal(blobs.length, 2);
  // Another tenant's saves never evict this one's entries.
  await store.save("globex", key("x"), bytes(240, 9), "rg");
  assert.ok(await store.lookup("acme", key("1")));
  assert.ok(await store.lookup("acme", key("3")));
});

it("refuses an archive larger than the bound, and hostile keys and digests", async () => {
  const store = createFsCacheStore({ dir: join(dir, "c"), maxBytes: 10 });
  await assert.rejects(
    store.save("acme", key("big"), bytes(11, 0), "r"),
    /ETOOLARGE|past the tenant's cache bound/,
  );
  for (const bad of ["../../etc/passwd", "", "A".repeat(64), `${key("x")}/..`])
    await assert.rejects(store.save("acme", bad, bytes(1, 0), "r"), /key: not a sha256/);
  assert.equal(await store.read("acme", "../x"), undefined);
  assert.equal(await store.lookup("acme", "../x"), undefined);
});

it("a blob whose content no longer matches its digest is not served", async () => {
  const store = createFsCacheStore({ dir: join(dir, "d"), maxBytes: 1000 });
  const saved = await store.save("acme", key("k"), bytes(10, 7), "r");
  const tenant = readdirSync(join(dir, "d"))[0] as string;
  writeFileSync(join(dir, "d", tenant, "blobs", `${saved.digest}.tar`), "tampered");
  assert.equal(await store.read("acme", saved.digest), undefined);
});
