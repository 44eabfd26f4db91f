/**
 * Attack: a policy reload (SIGHUP) that lands while the kernel is deciding a call makes
 * the call's policy.decision name a policy that did not decide it.
 *
 * Why it gets through: kernel.ts handle() reads `opts.policy()` once at its top and
 * records that policy's digest (decisionProvenance) on the call's policy.decision, but the
 * decision itself is made later, after an await: decideWithTrust() awaits the trust
 * counters (a Redis read in agentd, trust-store.ts) and only then decideStrict() reads
 * `opts.policy()` again (withProvenance/withReplacing read it a third time after their
 * probes). A reload in between: decided by the new policy, recorded as the old one.
 *
 * What must hold (issue #29, "Provenance"): every policy.decision records the digest of
 * the policy that made the decision. Here the store is the real PolicyStore, reloaded
 * from its real file while the trust lookup is in flight — what SIGHUP does at any moment.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { queued } from "../eventlog/conformance.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { createKernel, type KernelRun } from "./kernel.ts";
import { policyDigest } from "./policy-digest.ts";
import { readPolicyFile } from "./policy-loader.ts";
import { createPolicyStore } from "./policy-store.ts";

const ROOT = join(import.meta.dirname, "..", "..");
let dir = "";
let log: FileEventLog;
let sandbox: Sandbox;
let cleanup: (() => Promise<void>) | undefined;

const LOOSE = [
  "version: 1",
  `extends: ${join(ROOT, "policy.yaml")}`,
  "capabilities:",
  "  process.run: { approval: never }",
].join("\n");
const STRICTER = [LOOSE, "risk:", "  denyCommandPatterns: ['^echo reload-probe']"].join("\n");

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentd-attack3-prov-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
});

after(async () => {
  await cleanup?.();
  await log?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("attack3: provenance when a reload lands mid-decision", () => {
  it("the recorded policy_digest is the digest of the policy that decided", async () => {
    const file = join(dir, "policy.yaml");
    await writeFile(file, LOOSE);
    const store = createPolicyStore(file, { logger: { info: () => {}, error: () => {} } });
    const loose = store.current();
    const stricter = readPolicyFile(
      await writeFile(join(dir, "s.yaml"), STRICTER).then(() => join(dir, "s.yaml")),
    );
    assert.ok(stricter.ok);
    const runId = ulid();
    const box = await sandbox.create({
      runId,
      tenantId: "t",
      image: sandboxImage("test"),
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: await packWorkspace([
        { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
      ]),
    });
    await log.append(queued(runId, "t"));
    const run: KernelRun = {
      runId,
      sessionId: "s1",
      fence: await log.bumpEpoch(runId),
      sandbox: box,
    };
    const kernel = createKernel({
      log,
      policy: () => store.current(),
      secretProviders: [],
      artifacts: new FsArtifactStore(join(dir, "artifacts")),
      // The trust lookup is a storage round trip; the operator's SIGHUP lands during it.
      trustCounters: async () => {
        await writeFile(file, STRICTER);
        assert.deepEqual(store.reload(), { ok: true });
        return {};
      },
    });
    await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "echo reload-probe" },
    });
    const ps = (await log.read(runId, 0)).map((e) => e.event.payload);
    const d = ps.find((p) => p.case === "policyDecision");
    assert.ok(d?.case === "policyDecision");
    const decidedBy = d.value.rule.startsWith("risk.denyCommandPatterns")
      ? policyDigest(stricter.policy)
      : policyDigest(loose);
    assert.equal(
      d.value.policyDigest,
      decidedBy,
      `decision ${d.value.decision} rule ${d.value.rule} was recorded under ${d.value.policyDigest === policyDigest(loose) ? "the policy before the reload" : "the reloaded policy"}`,
    );
  });
});
