/**
 * Cache archives out of and into a real sandbox whose tar is busybox's (the test image, as
 * in an Alpine-based image of a run's own): /cache is archived there and restored into
 * another sandbox, not only where GNU tar is.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { SandboxHandle } from "../sandbox/port.ts";
import { testBoxSpec, testSandbox } from "../testing/docker.ts";
import { archiveCache, checkArchive, restoreCache } from "./cache-transfer.ts";

const CACHE_BYTES = 8 * 1024 * 1024;
let t: Awaited<ReturnType<typeof testSandbox>>;
const boxes: SandboxHandle[] = [];

before(async () => {
  t = await testSandbox();
});
after(async () => {
  for (const b of boxes) await b.destroy().catch(() => undefined);
  await t?.cleanup();
});

async function box(image: "base" | "test" = "test"): Promise<SandboxHandle> {
  const spec = testBoxSpec(image);
  const b = await t.sandbox.create({
    ...spec,
    limits: { ...spec.limits, cacheBytes: CACHE_BYTES },
  });
  boxes.push(b);
  return b;
}

async function sh(b: SandboxHandle, script: string): Promise<string> {
  const r = await b.exec({
    argv: ["sh", "-c", script],
    timeoutMs: 60_000,
    maxOutputBytes: 64 * 1024,
  });
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout;
}

it("archives /cache where tar is busybox's, and restores it into another sandbox", async () => {
  const a = await box();
  assert.match(await sh(a, "tar --help 2>&1 | head -1 || true"), /BusyBox/i);
  await sh(a, "mkdir -p /cache/npm/_cacache && printf cached > /cache/npm/_cacache/entry");
  const data = await archiveCache(a, CACHE_BYTES, []);
  assert.deepEqual(await checkArchive(data), { installedTree: false });
  const b = await box();
  await restoreCache(b, data);
  assert.equal(await sh(b, "cat /cache/npm/_cacache/entry"), "cached");
});

it("where tar is GNU's (base image), the same files archive to the same bytes", async () => {
  const a = await box("base");
  await sh(
    a,
    "mkdir -p /cache/pip/a /cache/pip/b && printf 1 > /cache/pip/b/x && printf 2 > /cache/pip/a/y",
  );
  const one = await archiveCache(a, CACHE_BYTES, []);
  const two = await archiveCache(a, CACHE_BYTES, []);
  assert.deepEqual(Buffer.from(one), Buffer.from(two));
  // Names sorted: a/ before b/ although tmpfs lists the newer b/ first.
  const text = Buffer.from(one).toString("latin1");
  assert.ok(text.indexOf("cache/pip/a/") < text.indexOf("cache/pip/b/"));
});
