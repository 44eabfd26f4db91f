/**
 * Shadow mode in the kernel: a candidate policy is evaluated beside the enforced one on
 * every call; a call it decides differently gets one policy.shadow (right after its
 * policy.decision) and nothing else changes. Real kernel, real embedded log, and a real
 * container for the call that runs; the other calls use a sandbox whose every method throws
 * (a probe by the candidate would fail the test's expectation of its event).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision, PolicySource } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { metrics } from "../telemetry/metrics.ts";
import { countingExecs, sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel, type KernelOptions } from "./kernel.ts";
import { policyDigest } from "./policy-digest.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { createPolicyStore } from "./policy-store.ts";
import { indexWorkspace } from "./script-probe.ts";
import { createShadowPolicies } from "./shadow-policies.ts";

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
const quiet = { info() {}, error() {} };

let dir: string;
let log: FileEventLog;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-shadow-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const enforced = load("version: 1\nrisk: {denyCommands: [curl]}\n");
const stricter = load("version: 1\nrisk: {denyCommands: [curl, echo, wget]}\n");

async function freshRun(sandbox: SandboxHandle = untouchable) {
  const q = await queueRun(log, { prompt: "p" });
  return { ...q, fence: await log.bumpEpoch(q.runId), sandbox };
}
const kernelWith = (shadow: KernelOptions["shadow"], extra: Partial<KernelOptions> = {}) =>
  createKernel({
    log,
    policy: () => enforced,
    policyPath: () => "/etc/agentd/policy.yaml",
    shadow,
    shadowTenant: "acme",
    secretProviders: [],
    ...extra,
  });
const types = async (runId: string) =>
  (await log.read(runId, 0)).map((e) => e.event.payload.case ?? "");
const shadows = async (runId: string) =>
  (await log.read(runId, 0)).flatMap((e) =>
    e.event.payload.case === "policyShadow" ? [e.event.payload.value] : [],
  );

describe("shadow mode", () => {
  it("records a difference right after the call's decision, with both sides' rule and digest; the enforced outcome stands", async () => {
    const kernel = kernelWith(() => ({
      policy: load("version: 1\nrisk: {denyCommands: []}\n"),
      source: "server",
      path: "/etc/agentd/candidate.yaml",
    }));
    const run = await freshRun();
    const before = await metrics.policyShadowDifferences.get();
    const out = await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "curl https://example.test" },
    });
    assert.equal(out.kind, "result");
    assert.equal(out.kind === "result" && out.ok, false, "the enforced deny stands");
    assert.equal(out.kind === "result" && out.error?.code, "EPOLICY");
    const t = await types(run.runId);
    assert.deepEqual(t.slice(-4), ["toolCall", "policyDecision", "policyShadow", "toolResult"]);
    const [s] = await shadows(run.runId);
    assert.ok(s !== undefined);
    assert.equal(s.callId, "c1");
    assert.equal(s.tool, "process.run");
    assert.equal(s.enforced?.decision, Decision.DENY);
    assert.equal(s.enforced?.rule, "risk.denyCommands:curl");
    assert.equal(s.enforced?.policyDigest, policyDigest(enforced));
    assert.equal(s.enforced?.policyFile, "policy.yaml");
    assert.notEqual(s.candidate?.decision, Decision.DENY);
    assert.equal(s.candidate?.policyFile, "candidate.yaml", "base name only");
    assert.equal(s.candidate?.policySource, PolicySource.SERVER);
    assert.match(s.summary, /curl https:\/\/example\.test/);
    const after = await metrics.policyShadowDifferences.get();
    const count = (v: typeof after) =>
      v.values
        .filter((x) => x.labels.tenant === "acme" && x.labels.enforced === "deny")
        .reduce((n, x) => n + x.value, 0);
    assert.equal(count(after) - count(before), 1, "one difference counted");
  });

  it("counts nothing when the log refuses the record (a stale owner's call)", async () => {
    const kernel = kernelWith(() => ({
      policy: load("version: 1\nrisk: {denyCommands: []}\n"),
      source: "server",
      path: "/etc/agentd/candidate.yaml",
    }));
    const run = await freshRun();
    await log.bumpEpoch(run.runId); // another owner took the run: this fence is stale
    const count = async () =>
      (await metrics.policyShadowDifferences.get()).values
        .filter((x) => x.labels.tenant === "acme")
        .reduce((n, x) => n + x.value, 0);
    const before = await count();
    await assert.rejects(
      kernel.handle(run, { callId: "c1", tool: "process.run", input: { command: "curl x" } }),
      (err) => isAgentdError(err, "EFENCED"),
    );
    assert.deepEqual(await shadows(run.runId), []);
    assert.equal(await count(), before, "no difference counted for a record not in the log");
  });

  it("writes nothing when the candidate decides the same, and nothing without a candidate", async () => {
    const same = load("version: 1\nrisk: {denyCommands: [curl]}\n");
    const run = await freshRun();
    await kernelWith(() => ({ policy: same, source: "server", path: "c.yaml" })).handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "curl x" },
    });
    await kernelWith(undefined).handle(run, {
      callId: "c2",
      tool: "process.run",
      input: { command: "curl x" },
    });
    await kernelWith(() => undefined).handle(run, {
      callId: "c3",
      tool: "process.run",
      input: { command: "curl x" },
    });
    assert.equal((await shadows(run.runId)).length, 0);
    assert.equal((await types(run.runId)).filter((t) => t === "policyDecision").length, 3);
  });

  it("a candidate that denies never stops a call the enforced policy runs (real container)", async () => {
    const t = await testSandbox();
    try {
      const runId = ulid();
      const box = await t.sandbox.create({
        runId,
        tenantId: "t",
        image: sandboxImage("test"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace([
          { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
        ]),
      });
      const run = await freshRun(box);
      const kernel = kernelWith(() => ({ policy: stricter, source: "tenant", path: "/t/s.yaml" }));
      const out = await kernel.handle(run, {
        callId: "e1",
        tool: "process.run",
        input: { command: "echo shadow-ran" },
      });
      assert.equal(out.kind, "result");
      assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out));
      assert.match(JSON.stringify(out.kind === "result" ? out.output : ""), /shadow-ran/);
      const [s] = await shadows(run.runId);
      assert.equal(s?.candidate?.decision, Decision.DENY);
      assert.equal(s?.candidate?.rule, "risk.denyCommands:echo");
      assert.equal(s?.candidate?.policySource, PolicySource.TENANT);
      assert.ok((await types(run.runId)).includes("toolStarted"));
    } finally {
      await t.cleanup();
    }
  });

  it("the candidate reuses the enforced path's container probe: the same execs with a candidate as without (real container)", async () => {
    const t = await testSandbox();
    try {
      const files = [
        {
          path: "s.sh",
          type: "file" as const,
          mode: 0o644,
          data: Buffer.from("echo from-script\n"),
        },
      ];
      const box = await t.sandbox.create({
        runId: ulid(),
        tenantId: "t",
        image: sandboxImage("test"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace(files),
      });
      const lenient = load(
        "version: 1\nrisk: {denyCommands: [curl]}\ncapabilities:\n  process.run: { approval: never }\n",
      );
      const execsOf = async (shadow: KernelOptions["shadow"]) => {
        const counting = countingExecs(box);
        const run = {
          ...(await freshRun(counting.handle)),
          baseIndex: async () => indexWorkspace(files),
          pristine: false,
        };
        const out = await kernelWith(shadow).handle(run, {
          callId: "s1",
          tool: "process.run",
          input: { command: "sh s.sh" },
        });
        assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out));
        return { execs: counting.execs(), shadows: await shadows(run.runId) };
      };
      const without = await execsOf(undefined);
      const withShadow = await execsOf(() => ({
        policy: lenient,
        source: "server",
        path: "a.yaml",
      }));
      assert.ok(without.execs >= 2, "the enforced path probed, then ran the call");
      assert.equal(withShadow.execs, without.execs, "no probe of the candidate's own");
      assert.equal(without.shadows.length, 0);
      const [s] = withShadow.shadows;
      // Without the probe's facts it would ask (shadow.unprobed): the script is as uploaded.
      assert.equal(s?.candidate?.decision, Decision.PREVIEW_AUTO);
      assert.equal(s?.candidate?.rule, "capabilities.process.run.approval=never", "facts reused");
    } finally {
      await t.cleanup();
    }
  });

  it("a candidate that throws is recorded as a refusal; the enforced decision and outcome are unchanged", async () => {
    const hostile = new Proxy(enforced, {
      get: (target, key) => {
        if (key === "risk" || key === "capabilities") throw new Error("hostile candidate");
        return Reflect.get(target, key);
      },
    }) as Policy;
    const run = await freshRun();
    const out = await kernelWith(() => ({
      policy: hostile,
      source: "server",
      path: "h.yaml",
    })).handle(run, { callId: "h1", tool: "process.run", input: { command: "curl x" } });
    assert.equal(out.kind === "result" && out.error?.code, "EPOLICY");
    const [s] = await shadows(run.runId);
    assert.equal(s?.candidate?.decision, Decision.DENY);
    assert.equal(s?.candidate?.rule, "kernel.decide");
    assert.equal(s?.enforced?.rule, "risk.denyCommands:curl");
    // A shadow() that itself throws: no event, the call is decided as always.
    const run2 = await freshRun();
    const out2 = await kernelWith(() => {
      throw new Error("boom");
    }).handle(run2, { callId: "h2", tool: "process.run", input: { command: "curl x" } });
    assert.equal(out2.kind === "result" && out2.error?.code, "EPOLICY");
    assert.equal((await shadows(run2.runId)).length, 0);
  });

  it("a candidate that needs a probe the enforced path skipped asks (shadow.unprobed) and never probes", async () => {
    const denyBash = load("version: 1\nrisk: {denyCommands: [sh]}\n");
    const kernel = createKernel({
      log,
      policy: () => denyBash,
      shadow: () => ({ policy: enforced, source: "server", path: "c.yaml" }),
      secretProviders: [],
    });
    const run = { ...(await freshRun()), baseIndex: async () => new Map(), pristine: false };
    await kernel.handle(run, { callId: "p1", tool: "process.run", input: { command: "sh s.sh" } });
    const [s] = await shadows(run.runId);
    assert.equal(s?.enforced?.decision, Decision.DENY);
    assert.equal(s?.candidate?.decision, Decision.PREVIEW_APPROVAL);
    assert.equal(s?.candidate?.rule, "shadow.unprobed");
  });

  it("invalid input is decided before any policy: no difference", async () => {
    const run = await freshRun();
    await kernelWith(() => ({ policy: stricter, source: "server", path: "c.yaml" })).handle(run, {
      callId: "i1",
      tool: "process.run",
      input: { command: 42 },
    });
    await kernelWith(() => ({ policy: stricter, source: "server", path: "c.yaml" })).handle(run, {
      callId: "i2",
      tool: "no.such.tool",
      input: {},
    });
    assert.equal((await shadows(run.runId)).length, 0);
  });
});

describe("candidate files", () => {
  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const good = () => write(`good-${ulid()}.yaml`, "version: 1\nrisk: {denyCommands: [rm]}\n");
  const server = () => createPolicyStore(good(), { logger: quiet });

  for (const [name, text] of [
    ["unknown key", "version: 1\nrisk: {denyCommandz: [rm]}\n"],
    ["wrong type", "version: 1\nrisk: {denyCommands: rm}\n"],
    ["not yaml", "version: 1\nrisk: [\u0000\u001b[2J\n"],
    ["alias bomb", "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"],
    ["empty", ""],
  ] as const) {
    it(`a tenant's broken candidate (${name}) refuses the start, naming the tenant, field and file`, () => {
      const bad = write(`bad-${ulid()}.yaml`, text);
      assert.throws(
        () =>
          createShadowPolicies({
            server: undefined,
            enforced: server(),
            files: () => new Map([["acme", bad]]),
            logger: quiet,
          }),
        (e: unknown) =>
          isAgentdError(e, "EVALIDATION") &&
          e.field === "tenants.acme.shadowPolicy" &&
          e.message.includes(bad),
      );
    });
  }

  it("a broken reload keeps the last good candidate; the server's candidate is only for tenants on the server's policy", () => {
    const path = good();
    const s = createShadowPolicies({
      server: server(),
      enforced: server(),
      files: () => new Map([["acme", path]]),
      logger: quiet,
    });
    const first = s.forTenant("acme", "tenant");
    assert.equal(first?.source, "tenant");
    writeFileSync(path, "version: 1\nrisk: {denyCommands: 7}\n");
    s.reload();
    assert.equal(s.forTenant("acme", "tenant")?.policy, first?.policy, "last good kept");
    assert.equal(s.forTenant("other", "server")?.source, "server");
    assert.equal(s.forTenant("other", "tenant"), undefined, "never compared with a tenant's own");
    const none = createShadowPolicies({
      server: undefined,
      enforced: server(),
      files: () => new Map(),
      logger: quiet,
    });
    assert.equal(none.forTenant("other", "server"), undefined, "no candidate: no shadow");
    s.close();
    none.close();
  });
});
