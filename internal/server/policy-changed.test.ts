/**
 * policy.changed end to end: a real `agentd dev` (embedded log) with an auth file naming
 * two tenants, one with a policy file of its own, and WatchEvents streams of both. A change
 * of the server's file reaches the feed of the tenant without a file (once, old and new
 * digest as computed here from the files), not the other's; a reformatted file and a
 * SIGHUP that changes nothing add nothing; a change of the tenant's own file reaches that
 * tenant alone.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Event, PolicySource } from "../gen/agentd/v1/events_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { policyDigest } from "../kernel/policy-digest.ts";
import { loadPolicyFile } from "../kernel/policy-loader.ts";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";
import { EXAMPLE } from "../testing/console-fixtures.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-policy-changed-"));
const serverPolicy = join(dir, "server.yaml");
const ownPolicy = join(dir, "own.yaml");
let dev: AgentdProcess;
let client: GrpcRunClient;

before(async () => {
  writeFileSync(serverPolicy, "version: 1\nrisk: {denyCommands: [curl]}\n");
  writeFileSync(ownPolicy, "version: 1\nrisk: {denyCommands: [wget]}\n");
  writeFileSync(
    join(dir, "auth.yaml"),
    `tokens:
  - { sha256: ${sha256Hex("own-token")}, tenant: own, roles: [submit, read] }
  - { sha256: ${sha256Hex("plain-token")}, tenant: plain, roles: [submit, read] }
tenants:
  own:
    policy: own.yaml
`,
  );
  dev = await startAgentd("dev", [
    ...["--data-dir", join(dir, "data"), "--auth-file", join(dir, "auth.yaml")],
    ...["--policy", serverPolicy, "--replay", join(EXAMPLE, "transcript.json")],
  ]);
  client = new GrpcRunClient(dev.addr);
});
after(async () => {
  client?.close();
  await dev?.stop("SIGTERM").catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

/** A tenant's feed from now on (WatchEvents), its policy.changed payloads. */
function watch(token: string) {
  const events: Event[] = [];
  const call = client.serverStream(RunService.method.watchEvents, {}, token);
  call.on("data", (m: { event?: Event }) => m.event && events.push(m.event));
  call.on("error", () => undefined);
  return {
    changes: () =>
      events.flatMap((e) =>
        e.payload.case === "policyChanged" ? [{ type: e.type, ...e.payload.value }] : [],
      ),
    cancel: () => call.cancel(),
  };
}

/** Waits (generously: a loaded machine) until the server logged `re` `n` times. */
async function waitForLog(re: RegExp, n: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if ((dev.output().match(new RegExp(re, "g")) ?? []).length >= n) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no ${n}× ${re} in the server's log within 60 s\n${dev.output().slice(-3000)}`);
}

async function until<V>(what: string, probe: () => V | undefined, ms = 60_000): Promise<V> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

describe("policy.changed in the tenant feed", { timeout: 300_000 }, () => {
  it("reaches exactly the tenants whose effective digest moved, once, with old and new digest", async () => {
    const own = watch("own-token");
    const plain = watch("plain-token");
    await new Promise((r) => setTimeout(r, 1000)); // the streams are open
    const before = policyDigest(loadPolicyFile(serverPolicy));

    // A reformat and a SIGHUP that change nothing: no notice.
    writeFileSync(serverPolicy, "risk:\n  denyCommands: [curl]\nversion: 1\n");
    await waitForLog(/"msg":"policy reloaded"/, 1);
    process.kill(dev.pid, "SIGHUP");
    await waitForLog(/"msg":"policy reloaded"/, 2);

    // The server's file changes: plain (no file of its own) is told; own is not.
    writeFileSync(serverPolicy, "version: 1\nrisk: {denyCommands: [curl, nc]}\n");
    const after = policyDigest(loadPolicyFile(serverPolicy));
    await until("policy.changed for plain", () => plain.changes()[0]);
    // The tenant's own file changes: own alone.
    const ownBefore = policyDigest(loadPolicyFile(ownPolicy));
    writeFileSync(ownPolicy, "version: 1\nrisk: {denyCommands: [wget, scp]}\n");
    const ownAfter = policyDigest(loadPolicyFile(ownPolicy));
    await until("policy.changed for own", () => own.changes()[0]);
    // One more SIGHUP: nothing changed since, nothing more is written.
    process.kill(dev.pid, "SIGHUP");
    await waitForLog(/"msg":"policy reloaded"/, 4);
    await new Promise((r) => setTimeout(r, 2000)); // a duplicate would arrive by now

    const p = plain.changes();
    assert.equal(p.length, 1, p.map((x) => `${x.oldDigest}→${x.newDigest}`).join(", "));
    assert.equal(p[0]?.type, "policy.changed");
    assert.equal(p[0]?.tenantId, "plain");
    assert.equal(p[0]?.oldDigest, before);
    assert.equal(p[0]?.newDigest, after);
    assert.equal(p[0]?.source, PolicySource.SERVER);
    assert.equal(p[0]?.policyFile, "server.yaml");
    assert.match(p[0]?.reporter ?? "", /^dev .+\/\d+$/);
    const o = own.changes();
    assert.equal(o.length, 1, o.map((x) => `${x.oldDigest}→${x.newDigest}`).join(", "));
    assert.equal(o[0]?.tenantId, "own");
    assert.equal(o[0]?.oldDigest, ownBefore);
    assert.equal(o[0]?.newDigest, ownAfter);
    assert.equal(o[0]?.source, PolicySource.TENANT);
    assert.equal(o[0]?.policyFile, "own.yaml");
    own.cancel();
    plain.cancel();
  });
});
