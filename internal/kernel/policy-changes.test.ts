/**
 * policy.changed: after a reload, one notice in the feed of each tenant whose effective
 * policy digest moved, none for a reformat or a failed reload, none twice for one switch.
 * Real policy files, the real PolicyStore and TenantPolicies, the embedded log's feed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { fromJsonString } from "@bufbuild/protobuf";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { EventSchema, PolicySource } from "../gen/agentd/v1/events_pb.js";
import { createPolicyChanges } from "./policy-changes.ts";
import { policyDigest } from "./policy-digest.ts";
import { createPolicyStore } from "./policy-store.ts";
import { createTenantPolicies } from "./tenant-policies.ts";

const quiet = { info() {}, error() {} };
let dir: string;
let log: FileEventLog;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-policy-changed-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The policy.changed notices in the feed, decoded. */
const notices = async () =>
  (await log.readFeed("", 1000)).flatMap((e) => {
    if (e.event === undefined) return [];
    const ev = fromJsonString(EventSchema, e.event);
    return ev.payload.case === "policyChanged"
      ? [{ feedTenant: e.tenantId, type: ev.type, ...ev.payload.value }]
      : [];
  });

it("announces a changed digest to exactly the tenants it applies to, once per switch", async () => {
  const serverPath = join(dir, "server.yaml");
  const acmePath = join(dir, "acme.yaml");
  writeFileSync(serverPath, "version: 1\nrisk: {denyCommands: [curl]}\n");
  writeFileSync(acmePath, "version: 1\nrisk: {denyCommands: [wget]}\n");
  const server = createPolicyStore(serverPath, { logger: quiet });
  const tenants = createTenantPolicies({
    server,
    files: () => new Map([["acme", acmePath]]),
    logger: quiet,
  });
  const changes = createPolicyChanges({
    tenants: () => ["acme", "globex", "initech", "acme"],
    effective: (t) => tenants.forTenant(t),
    publish: (t, runId, json) => log.publish(t, runId, json),
    reporter: "worker test/1",
    logger: quiet,
    now: () => 1_800_000_000_000,
  });
  const before = policyDigest(server.current());

  // 1. Nothing reloaded: nothing to announce.
  await changes.check();
  assert.deepEqual(await notices(), []);

  // 2. The server file reformatted and reordered: same digest, no notice.
  writeFileSync(serverPath, "risk:\n  denyCommands:\n    - curl\nversion: 1 # same\n");
  assert.deepEqual(server.reload(), { ok: true });
  await changes.check();
  assert.deepEqual(await notices(), [], "a reformat is not a change");

  // 3. A broken server file: the last good policy stays, no notice.
  writeFileSync(serverPath, "version: 1\nrisk: {denyCommands: [curl\n");
  assert.equal(server.reload().ok, false);
  await changes.check();
  assert.deepEqual(await notices(), []);

  // 4. The server file changes: every tenant without its own file, not acme.
  writeFileSync(serverPath, "version: 1\nrisk: {denyCommands: [curl, nc]}\n");
  server.reload();
  const after = policyDigest(server.current());
  await changes.check();
  await changes.check(); // a second check (another reload signal) announces nothing more
  const n1 = await notices();
  assert.deepEqual(n1.map((n) => n.feedTenant).sort(), ["globex", "initech"]);
  for (const n of n1) {
    assert.equal(n.type, "policy.changed");
    assert.equal(n.tenantId, n.feedTenant);
    assert.equal(n.oldDigest, before);
    assert.equal(n.newDigest, after);
    assert.equal(n.source, PolicySource.SERVER);
    assert.equal(n.policyFile, "server.yaml");
    assert.equal(n.reporter, "worker test/1");
  }

  // 5. acme's own file changes: acme alone.
  writeFileSync(acmePath, "version: 1\nrisk: {denyCommands: [wget, scp]}\n");
  const acmeBefore = policyDigest(tenants.forTenant("acme").policy);
  tenants.reload();
  await changes.check();
  const n2 = (await notices()).slice(n1.length);
  assert.equal(n2.length, 1);
  assert.equal(n2[0]?.feedTenant, "acme");
  assert.equal(n2[0]?.oldDigest, acmeBefore);
  assert.equal(n2[0]?.newDigest, policyDigest(tenants.forTenant("acme").policy));
  assert.equal(n2[0]?.source, PolicySource.TENANT);
  assert.equal(n2[0]?.policyFile, "acme.yaml");
  tenants.close();
});

it("a notice that could not be written is tried again at the next check", async () => {
  const p = join(dir, "retry.yaml");
  writeFileSync(p, "version: 1\n");
  const server = createPolicyStore(p, { logger: quiet });
  let fail = true;
  const written: string[] = [];
  const changes = createPolicyChanges({
    tenants: () => ["t1"],
    effective: () => ({ policy: server.current(), source: "server", path: p }),
    publish: async (_t, _r, json) => {
      if (fail) throw new Error("feed unavailable");
      written.push(json);
    },
    reporter: "server test/2",
    logger: quiet,
  });
  writeFileSync(p, "version: 1\nrisk: {denyCommands: [curl]}\n");
  server.reload();
  await changes.check();
  assert.deepEqual(written, []);
  fail = false;
  await changes.check();
  assert.equal(written.length, 1);
  assert.match(String(written[0]), /"policy\.changed"/);
});
