/**
 * Issue #24's corpus end to end: each project of examples/ (python-billing, go-shortid,
 * rust-thousands, java-slugs, node-durations) is driven to green by the replay model playing
 * the example's transcript.json, through the parts a real run has: the ecosystem's image
 * chosen by detection (run.started says which and why), the setup step (`setup.run`) through
 * the run's egress proxy with the ecosystem's registry preset (network.request events to the
 * registry), the patch, and test.run whose structured results say failed > 0 before the
 * patch and failed = 0 after; the run's patch artifact applies with `git apply` to a copy of
 * the example. Then: a second run of one example restores its dependency cache
 * (`cache.restored`), an exact hit, so its setup is answered from the cache
 * (`cached: true`) and runs no package manager; and a Python run paused for an
 * approval (hold 0: snapshot, container gone) resumes in a new container and still goes green.
 *
 * Real parts: the embedded event log, the artifact store, the directory dependency cache,
 * the kernel on the repository's default policy.yaml (plus `sandbox.network: allowlist` and
 * the ecosystem's `network.presets`), the language images (`make images`) in real containers,
 * the egress proxy, the real registries, the replay engine. The five examples run one after
 * the other on one set of these, as one agentd would run them.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createFsCacheStore } from "../depcache/fs-cache-store.ts";
import type { DepCacheStore } from "../depcache/port.ts";
import { createReplayEngine, loadTranscript } from "../engine/replay-engine.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { NETWORK_PRESETS } from "../kernel/network-presets.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { CORPUS, corpusPolicy, EXAMPLES, exampleFiles } from "../testing/corpus.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { approveInLog, queueRun } from "../testing/worker-fixtures.ts";
import { lastArtifact, PATCH } from "./run-artifacts.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let artifacts: FsArtifactStore;
let cache: DepCacheStore;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-corpus-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  cache = createFsCacheStore({ dir: join(dir, "depcache"), maxBytes: 2 * 1024 ** 3 });
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
  for (const { ecosystem } of CORPUS) {
    const image = `agentd-sandbox-${ecosystem}:latest`;
    assert.ok(await sandbox.hasImage?.(image), `${image} is not built: run 'make images'`);
  }
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const signal = () => new AbortController().signal;

interface Drive {
  runId: string;
  events: Event[];
}

/** One run of `name` under `policy` with the example's transcript, driven until it ends or pauses. */
async function startRun(name: string, policy: Policy) {
  const ws = await artifacts.put(await packWorkspace(exampleFiles(name)));
  const run = await queueRun(log, {
    prompt: `fix the failing test of ${name}`,
    workspaceDigest: ws.digest,
    workspaceSizeBytes: ws.size,
  });
  const engine = createReplayEngine({
    transcript: loadTranscript(join(EXAMPLES, name, "transcript.json")),
    firstDelayMs: 0,
    deltaDelayMs: 0,
  });
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: "http://127.0.0.1:9" },
    { engine, depCache: cache, approvalHoldMs: 0 },
  );
  const drive = async () => driveRun(deps, run.runId, await log.bumpEpoch(run.runId), signal());
  const events = async () => (await log.read(run.runId, 0)).map((e) => e.event);
  return { run, drive, events };
}

/** The run's events in short, for a failure message. */
function summaryOf(events: readonly Event[]): string {
  return events
    .map((e) => {
      const p = e.payload;
      if (p.case === "toolCall") return `call ${p.value.tool} ${p.value.inputJson.slice(0, 200)}`;
      if (p.case === "toolResult")
        return `result ${p.value.ok} ${p.value.error?.message ?? ""} ${p.value.outputJson.slice(-1500)}`;
      if (p.case === "runCompleted") return `completed ${p.value.summary}`;
      if (p.case === "networkRequest") return `net ${p.value.host} ${p.value.decision}`;
      return p.case ?? "";
    })
    .join("\n");
}

function tail(events: readonly Event[]): string {
  return JSON.stringify(
    events.slice(-6).map((e) => ({ case: e.payload.case, value: e.payload.value })),
    (_, v) => (typeof v === "bigint" ? String(v) : v),
  );
}

async function driveToEnd(name: string, policy: Policy): Promise<Drive> {
  const r = await startRun(name, policy);
  const outcome = await r.drive();
  const logged = await log.read(r.run.runId, 0);
  assert.equal(verifyChain(logged.map((e) => e.json)).ok, true, "the run's hash chain holds");
  const events = logged.map((e) => e.event);
  assert.equal(outcome, "completed", `${name}: ${tail(events)}`);
  return { runId: r.run.runId, events };
}

type Payload = Event["payload"];
type Case = NonNullable<Payload["case"]>;
type ValueOf<C extends Case> = Extract<Payload, { case: C }>["value"];

/** The values of the events of one type, in order. */
function ofCase<C extends Case>(events: readonly Event[], c: C): ValueOf<C>[] {
  const out: ValueOf<C>[] = [];
  for (const e of events) if (e.payload.case === c) out.push(e.payload.value as ValueOf<C>);
  return out;
}

/** Each tool call's result, by call id: ok and the result document (unwrapped). */
function results(events: readonly Event[]) {
  const out = new Map<string, { ok: boolean; doc: Record<string, unknown>; error: string }>();
  for (const r of ofCase(events, "toolResult")) {
    const raw = r.outputJson === "" ? {} : JSON.parse(r.outputJson);
    out.set(r.callId, {
      ok: r.ok,
      doc: (raw.result ?? raw) as Record<string, unknown>,
      error: r.error?.message ?? "",
    });
  }
  return out;
}

/** The test.run calls of the run, in order, with their structured results. */
function testRuns(events: readonly Event[]) {
  const byId = results(events);
  return ofCase(events, "toolCall")
    .filter((c) => c.tool === "test.run")
    .map((c) => {
      const r = byId.get(c.callId);
      assert.ok(r !== undefined, `no result for test.run ${c.callId}`);
      return {
        exitCode: r.doc.exitCode as number,
        tests: r.doc.tests as { format: string; passed: number; failed: number } | undefined,
        raw: r,
      };
    });
}

/** The setup call's result and the network requests it made. */
function setupOf(events: readonly Event[]) {
  const calls = ofCase(events, "toolCall").filter((c) => c.tool === "setup.run");
  assert.ok(calls.length >= 1, `a setup.run call: ${tail(events)}`);
  const setup = calls[0];
  assert.ok(setup !== undefined);
  const r = results(events).get(setup.callId);
  assert.ok(r !== undefined, "the setup's result");
  const requests = ofCase(events, "networkRequest").filter((n) => n.callId === setup.callId);
  return { call: setup, result: r, requests };
}

/** `git apply` of the run's patch to a fresh copy of the example succeeds. */
async function assertPatchApplies(name: string, events: readonly Event[]): Promise<void> {
  const digest = lastArtifact(events, PATCH);
  assert.ok(digest, `${name}: the run emitted a patch`);
  const chunks: Buffer[] = [];
  for await (const c of artifacts.read(digest)) chunks.push(Buffer.from(c));
  const copy = mkdtempSync(join(dir, `apply-${name}-`));
  cpSync(join(EXAMPLES, name), copy, { recursive: true });
  const patchFile = join(dir, `${name}-${digest.slice(-12)}.patch`);
  writeFileSync(patchFile, Buffer.concat(chunks));
  execFileSync("git", ["apply", "--check", patchFile], { cwd: copy });
  execFileSync("git", ["apply", patchFile], { cwd: copy });
  const diff = readFileSync(patchFile, "utf8");
  assert.ok(
    !/node_modules|target\/|__pycache__|\.venv/.test(diff),
    `${name}: patch holds build output`,
  );
}

describe("the corpus, each example to green", { concurrency: false }, () => {
  for (const ex of CORPUS) {
    it(`${ex.name}: ${ex.ecosystem} image by detection, setup through ${ex.preset}, red then green, patch applies`, async () => {
      const policy = await corpusPolicy(ex.preset);
      const { events } = await driveToEnd(ex.name, policy);

      const [started] = ofCase(events, "runStarted");
      assert.ok(started);
      assert.equal(started.image, `agentd-sandbox-${ex.ecosystem}:latest`);
      assert.equal(started.ecosystem, ex.ecosystem);
      assert.ok(started.imageReason.length > 0, "run.started says why");

      const setup = setupOf(events);
      assert.ok(
        setup.result.ok,
        `${ex.name} setup: ${setup.result.error} ${JSON.stringify(setup.result.doc).slice(-2000)}`,
      );
      assert.equal(setup.result.doc.exitCode, 0, JSON.stringify(setup.result.doc).slice(-3000));
      const hosts = new Set<string>(NETWORK_PRESETS[ex.preset].map((h) => h.replace(/:\d+$/, "")));
      const allowed = setup.requests.filter((n) => n.decision === "allowed" && hosts.has(n.host));
      assert.ok(
        allowed.length > 0,
        `${ex.name}: the setup reached its registry: ${JSON.stringify(setup.requests.map((n) => [n.host, n.decision, n.reason]))}`,
      );

      const tests = testRuns(events);
      assert.equal(tests.length, 2, `${ex.name}: two test runs: ${summaryOf(events)}`);
      const [red, green] = tests;
      assert.ok(
        red?.tests && green?.tests,
        `${ex.name}: structured results ${JSON.stringify(tests.map((t) => t.raw.doc)).slice(0, 3000)}`,
      );
      assert.ok(red.tests.failed > 0, `${ex.name}: failed > 0 before the patch`);
      assert.notEqual(red.exitCode, 0);
      assert.equal(green.tests.failed, 0, `${ex.name}: failed = 0 after the patch`);
      assert.ok(green.tests.passed > 0);
      assert.equal(green.exitCode, 0);

      assert.equal(ofCase(events, "runCompleted").length, 1);
      await assertPatchApplies(ex.name, events);
    });
  }
});

describe("the corpus again: a second run restores the cache and does not run its setup", {
  concurrency: false,
}, () => {
  for (const ex of CORPUS) {
    it(`${ex.name}: cache.restored, an exact hit: the setup answers from the cache, runs no package manager, connects to no registry, still green`, async () => {
      const policy = await corpusPolicy(ex.preset);
      const { events } = await driveToEnd(ex.name, policy);
      const [restored] = ofCase(events, "cacheRestored");
      assert.ok(restored, `${ex.name}: cache.restored: ${summaryOf(events)}`);
      assert.ok(restored.savedByRun.length > 0, "names the run that saved it");
      const setup = setupOf(events);
      assert.equal(setup.result.doc.exitCode, 0, JSON.stringify(setup.result.doc).slice(-3000));
      // An exact hit (same tenant, image build, line and inputs): answered from the cache,
      // the package manager never started.
      assert.equal(setup.result.doc.cached, true, JSON.stringify(setup.result.doc).slice(-3000));
      assert.equal(setup.result.doc.digest, restored.digest);
      assert.equal(setup.result.doc.savedByRun, restored.savedByRun);
      assert.equal(
        ofCase(events, "toolOutput").filter((o) => o.callId === setup.call.callId).length,
        0,
        `${ex.name}: no process of the setup streamed output`,
      );
      assert.deepEqual(
        setup.requests.map((n) => `${n.host} ${n.decision}`),
        [],
        `${ex.name}: the warm setup made no network request`,
      );
      const tests = testRuns(events);
      assert.equal(tests.at(-1)?.tests?.failed, 0);
      assert.equal(tests.at(-1)?.exitCode, 0);
    });
  }
});

describe("a Python run paused for an approval (hold 0) resumes in a new container", () => {
  it("python-billing: the patch waits for a person, the run pauses, resumes and goes green", async () => {
    const base = await corpusPolicy("pypi");
    const policy: Policy = {
      ...base,
      capabilities: {
        ...base.capabilities,
        "repo.patch": { ...base.capabilities["repo.patch"], approval: "always" },
      },
    };
    const r = await startRun("python-billing", policy);
    assert.equal(await r.drive(), "paused", tail(await r.events()));
    const paused = await r.events();
    assert.ok(
      ofCase(paused, "artifactEmitted").some((a) => a.name === "workspace-snapshot"),
      "the pause stored a workspace snapshot",
    );
    assert.equal(await sandbox.find(r.run.runId), undefined, "the paused run's container is gone");
    const [asked] = ofCase(paused, "approvalRequested");
    assert.ok(asked, "an approval was asked for");
    assert.equal(asked.tool, "repo.patch");
    assert.equal(testRuns(paused).length, 1, "the red test run came before the pause");
    await approveInLog(log, r.run, asked.approvalId);
    const outcome = await r.drive();
    const events = await r.events();
    assert.equal(outcome, "completed", summaryOf(events));
    assert.equal(ofCase(events, "runResumed").length, 1);
    const [red, green] = testRuns(events);
    assert.ok((red?.tests?.failed ?? 0) > 0, "red before the patch");
    assert.equal(green?.tests?.failed, 0, `green after the resume: ${summaryOf(events)}`);
    assert.ok((green?.tests?.passed ?? 0) > 0);
    await assertPatchApplies("python-billing", events);
  });
});
