/**
 * Every policy.decision names the policy that decided: its digest (the canonical form's
 * sha256), its source (server or tenant file) and the file's base name, beside the rule.
 * Real kernel decisions into the embedded log; the calls are denied before any sandbox
 * use (its methods throw).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { PolicySource } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel } from "./kernel.ts";
import { policyDigest } from "./policy-digest.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";

const load = (text: string): Policy => {
  const r = parsePolicy(text, "p.yaml");
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
};
const untouchable = new Proxy(
  {},
  {
    get: () => () => {
      throw new Error("the sandbox must not be used");
    },
  },
) as SandboxHandle;

let dir: string;
let log: FileEventLog;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-provenance-"));
  log = await openFileEventLog({ dir });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const decisions = async (runId: string) =>
  (await log.read(runId, 0)).flatMap((e) =>
    e.event.payload.case === "policyDecision" ? [e.event.payload.value] : [],
  );

it("records the digest, source, file and rule of the policy in force at each call; a reload shows in the next", async () => {
  const server = load("version: 1\nrisk: {denyCommands: [curl]}\n");
  const tenant = load("version: 1\nrisk: {denyCommands: [curl, wget]}\n");
  let current = {
    policy: server,
    source: "server" as "server" | "tenant",
    path: "/etc/agentd/policy.yaml",
  };
  const kernel = createKernel({
    log,
    policy: () => current.policy,
    policySource: () => current.source,
    policyPath: () => current.path,
    secretProviders: [],
  });
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const run = { ...q, fence, sandbox: untouchable };
  const out1 = await kernel.handle(run, {
    callId: "c1",
    tool: "process.run",
    input: { command: "curl https://x" },
  });
  assert.equal(out1.kind, "result");
  current = { policy: tenant, source: "tenant", path: "/srv/tenants/acme/policy.yaml" };
  await kernel.handle(run, {
    callId: "c2",
    tool: "process.run",
    input: { command: "wget https://x" },
  });
  const [d1, d2] = await decisions(q.runId);
  assert.ok(d1 !== undefined && d2 !== undefined);
  assert.equal(d1.callId, "c1");
  assert.equal(d1.rule, "risk.denyCommands:curl");
  assert.equal(d1.policyDigest, policyDigest(server));
  assert.equal(d1.policySource, PolicySource.SERVER);
  assert.equal(d1.policyFile, "policy.yaml", "the base name only, never the directory");
  assert.equal(d2.callId, "c2");
  assert.equal(d2.rule, "risk.denyCommands:wget");
  assert.equal(d2.policyDigest, policyDigest(tenant));
  assert.notEqual(d2.policyDigest, d1.policyDigest);
  assert.equal(d2.policySource, PolicySource.TENANT);
  // The stored JSON carries them too (what WatchEvents and agentctl read).
  const json = (await log.read(q.runId, 0))
    .map((e) => e.json)
    .find((j) => j.includes('"c2"') && j.includes("policyDecision"));
  assert.match(json ?? "", new RegExp(`"policyDigest":"${policyDigest(tenant)}"`));
  assert.match(json ?? "", /"policySource":"POLICY_SOURCE_TENANT"/);
});

it("a kernel without a source or path records the server source and no file", async () => {
  const p = load("version: 1\nrisk: {denyCommands: [curl]}\n");
  const kernel = createKernel({ log, policy: () => p, secretProviders: [] });
  const q = await queueRun(log, { prompt: "p" });
  const run = { ...q, fence: await log.bumpEpoch(q.runId), sandbox: untouchable };
  await kernel.handle(run, { callId: "c1", tool: "no.such.tool", input: {} });
  const [d] = await decisions(q.runId);
  assert.equal(d?.rule, "capabilities");
  assert.equal(d?.policyDigest, policyDigest(p));
  assert.equal(d?.policySource, PolicySource.SERVER);
  assert.equal(d?.policyFile, "");
});

it("a policy that cannot be read records no digest instead of throwing (the kernel stays total)", async () => {
  const { decisionProvenance } = await import("./decision-provenance.ts");
  const p = load("version: 1\n");
  const broken = {
    ...p,
    get risk(): Policy["risk"] {
      throw new TypeError("boom");
    },
  } as Policy;
  const f = decisionProvenance(broken, "tenant", "/a/b/t.yaml");
  assert.deepEqual(f, {
    policyDigest: "",
    policySource: PolicySource.TENANT,
    policyFile: "t.yaml",
  });
});

it("a reload while the call is being decided: the decision and its digest come from one policy", async () => {
  // The old policy denies wget; the new one (a tenant file) allows it with no person.
  const before = load("version: 1\nrisk: {denyCommands: [wget]}\n");
  const after = load("version: 1\nrisk: {denyCommands: []}\n");
  let current = { policy: before, source: "server" as "server" | "tenant", path: "/p/a.yaml" };
  const kernel = createKernel({
    log,
    policy: () => current.policy,
    policySource: () => current.source,
    policyPath: () => current.path,
    secretProviders: [],
    // The reload lands while the kernel awaits the trust lookup.
    trustCounters: async () => {
      current = { policy: after, source: "tenant", path: "/p/b.yaml" };
      return {};
    },
  });
  const q = await queueRun(log, { prompt: "p" });
  const run = { ...q, fence: await log.bumpEpoch(q.runId), sandbox: untouchable };
  const out = await kernel.handle(run, {
    callId: "r1",
    tool: "process.run",
    input: { command: "wget https://x" },
  });
  assert.equal(out.kind, "result", "denied by the policy read when the call came in");
  const [d] = await decisions(q.runId);
  assert.match(d?.rule ?? "", /wget/);
  assert.equal(d?.policyDigest, policyDigest(before), "the digest of the policy that decided");
  assert.equal(d?.policySource, PolicySource.SERVER);
  assert.equal(d?.policyFile, "a.yaml");
});
