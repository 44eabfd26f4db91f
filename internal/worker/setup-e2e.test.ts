/**
 * Issue #24's setup step and dependency caches end to end, against real parts: the base
 * image, a real Docker sandbox on its egress network, the run's egress proxy, the real npm
 * registry (policy network.presets: [npm]), a real directory cache store. A Node repository
 * with one tiny real dependency (is-number@7.0.0, package-lock.json):
 *
 *   1. tenant acme, first run: `npm ci` is detected and runs as a recorded `setup.run` call
 *      before the model's first step, through the proxy (network.request to the registry);
 *      the model's code can require the package; /cache is saved (`cache.saved`); the
 *      run's patch holds no node_modules.
 *   2. acme again: the cache is restored before the setup (`cache.restored`, naming the
 *      first run and the archive it saved), an exact hit: the setup call is decided and
 *      recorded but answered from the cache (`cached: true`); npm never runs, no request.
 *   3. tenant globex, same repository: no restore of acme's cache; a cache of its own.
 *   4. the run moves to a new container (released, its container gone): its own archive is
 *      restored (`cache.restored`, reason "resume") and its setup runs again, recorded.
 *   5. a hostile commands.setup (sudo) is refused by the kernel, told to the model, and the
 *      run goes on.
 *
 * On this machine the registries resolve to 203.0.113.80 (reserved): the policy names
 * that range under network.private, as a deployment behind such a mirror would. TLS to the
 * registry is checked against the image's system roots (NODE_EXTRA_CA_CERTS below).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import Docker from "dockerode";
import * as tarStream from "tar-stream";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createFsCacheStore } from "../depcache/fs-cache-store.ts";
import type { DepCacheStore } from "../depcache/port.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { type Event, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { allowlistPolicy } from "../testing/egress-fixtures.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { approveInLog, callReply, sayReply } from "../testing/worker-fixtures.ts";
import { type DriverDeps, driveRun } from "./run-driver.ts";

const PACKAGE_JSON = JSON.stringify({
  name: "setup-fixture",
  version: "1.0.0",
  private: true,
  dependencies: { "is-number": "7.0.0" },
});
const PACKAGE_LOCK = JSON.stringify({
  name: "setup-fixture",
  version: "1.0.0",
  lockfileVersion: 3,
  requires: true,
  packages: {
    "": { name: "setup-fixture", version: "1.0.0", dependencies: { "is-number": "7.0.0" } },
    "node_modules/is-number": {
      version: "7.0.0",
      resolved: "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
      integrity:
        "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
      license: "MIT",
      engines: { node: ">=0.12.0" },
    },
  },
});

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let cacheStore: DepCacheStore;
let policy: Policy;
const execs: { runId: string; line: string }[] = [];
/** Called before each model request is answered (a test stops a drive there). */
let onAsk: (() => void) | undefined;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-setup-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => {
    onAsk?.();
    return script.shift() ?? { status: 500, body: {} };
  });
  const t = await testSandbox();
  cleanup = t.cleanup;
  // This machine intercepts TLS to the registries with its own CA. The sandbox images get
  // the build machine's extra CAs (sandbox-images/); this test does not depend on which
  // build of the image it finds: it hands the host's roots to each new sandbox, and Node
  // (which reads its own bundle unless told) is pointed at them.
  const roots = readFileSync("/etc/ssl/certs/ca-certificates.crt");
  sandbox = {
    ...t.sandbox,
    async create(spec) {
      const box = await t.sandbox.create({
        ...spec,
        env: { ...spec.env, NODE_EXTRA_CA_CERTS: "/tmp/host-roots.pem" },
      });
      const r = await box.exec({
        argv: ["sh", "-c", "cat > /tmp/host-roots.pem"],
        stdin: roots,
        timeoutMs: 30_000,
        maxOutputBytes: 4096,
      });
      assert.equal(r.exitCode, 0, r.stderr);
      // Every command line run in a sandbox, by run: the exact-hit test asserts npm never ran.
      const exec = box.exec.bind(box);
      box.exec = (req) => {
        execs.push({ runId: spec.runId, line: req.argv.join(" ") });
        return exec(req);
      };
      return box;
    },
  };
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  cacheStore = createFsCacheStore({ dir: join(dir, "depcache"), maxBytes: 64 * 1024 ** 2 });
  const base = allowlistPolicy({ presets: ["npm"], private: ["203.0.113.0/24"] });
  policy = {
    ...base,
    sandbox: { ...base.sandbox, cacheSize: 64 * 1024 ** 2, tmp: 64 * 1024 ** 2 },
  };
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const deps = (p: Policy = policy, store: DepCacheStore = cacheStore): DriverDeps =>
  stubDriverDeps(
    { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
    { depCache: store },
  );

async function queue(tenantId: string, files: Record<string, string>) {
  const tar = await packWorkspace(
    Object.entries(files).map(([path, text]) => ({
      path,
      type: "file" as const,
      mode: 0o644,
      data: Buffer.from(text),
    })),
  );
  const info = await artifacts.put(tar);
  const runId = ulid();
  const sessionId = ulid();
  await log.append({
    runId,
    sessionId,
    tenantId,
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, {
        tenantId,
        prompt: "use is-number",
        priority: 5,
        workspaceDigest: info.digest,
        workspaceSizeBytes: BigInt(info.size),
      }),
    },
  });
  return { runId, sessionId };
}

async function drive(
  tenant: string,
  files: Record<string, string>,
  p?: Policy,
  store?: DepCacheStore,
): Promise<{ runId: string; events: Event[] }> {
  const run = await queue(tenant, files);
  script = [
    callReply("use", "process.run", { command: `node -p "require('is-number')(5)"` }),
    sayReply("done"),
  ];
  const outcome = await driveRun(
    deps(p, store),
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const logged = await log.read(run.runId, 0);
  assert.equal(verifyChain(logged.map((e) => e.json)).ok, true);
  assert.equal(
    outcome,
    "completed",
    logged
      .slice(-4)
      .map((e) => e.json)
      .join("\n"),
  );
  return { runId: run.runId, events: logged.map((e) => e.event) };
}

const REPO = { "package.json": PACKAGE_JSON, "package-lock.json": PACKAGE_LOCK };

function resultOf(
  events: Event[],
  callId: string,
): { ok: boolean; output: Record<string, unknown> } {
  const r = events.find(
    (e) => e.payload.case === "toolResult" && e.payload.value.callId === callId,
  );
  assert.ok(r, `no tool.result for ${callId}`);
  const v = r.payload.value as { ok: boolean; outputJson: string };
  // A call with a preview carries { preview, result }.
  const doc = v.outputJson === "" ? {} : JSON.parse(v.outputJson);
  return { ok: v.ok, output: doc.result ?? doc };
}
const ofCase = <C extends Event["payload"]["case"]>(events: Event[], c: C) =>
  events.filter((e) => e.payload.case === c).map((e) => e.payload.value) as Extract<
    Event["payload"],
    { case: C }
  >["value"][];

describe("the setup step and its dependency cache", () => {
  let first: { runId: string; events: Event[] };
  let savedDigest = "";
  let savedKey = "";

  it("runs npm ci as a recorded call through the proxy before the model's first step, and saves /cache", async () => {
    first = await drive("acme", REPO);
    const calls = ofCase(first.events, "toolCall");
    assert.equal(calls[0]?.tool, "setup.run", "the setup is the run's first call");
    assert.equal(calls[0]?.callId, "setup_1");
    assert.equal(calls[1]?.tool, "process.run");
    const setupAt = first.events.findIndex((e) => e.payload.case === "toolCall");
    const firstModelText = first.events.findIndex((e) => e.payload.case === "usageUpdated");
    assert.ok(setupAt < firstModelText, "setup before the model's first step");
    const decision = ofCase(first.events, "policyDecision").find((d) => d.callId === "setup_1");
    assert.ok(decision, "the kernel decided the setup");
    const setup = resultOf(first.events, "setup_1");
    assert.equal(setup.ok, true);
    assert.equal(setup.output.exitCode, 0, String(setup.output.stderr));
    assert.equal(setup.output.command, "npm ci");
    assert.equal(setup.output.source, "package-lock.json");
    const reqs = ofCase(first.events, "networkRequest").filter((r) => r.callId === "setup_1");
    assert.ok(
      reqs.some((r) => r.host === "registry.npmjs.org" && r.decision === "allowed"),
      reqs.map((r) => `${r.host}:${r.port} ${r.decision} ${r.reason}`).join("; "),
    );
    assert.match(String(resultOf(first.events, "use").output.stdout), /true/);
    // Live output, as for any call.
    assert.ok(
      ofCase(first.events, "toolOutput").some(
        (o) => o.callId === "setup_1" && /added/.test(o.chunk),
      ),
      "npm ci's output streamed as tool.output",
    );
    const saved = ofCase(first.events, "cacheSaved");
    assert.equal(saved.length, 1);
    assert.equal(saved[0]?.ecosystem, "npm");
    assert.equal(saved[0]?.lockfile, "package-lock.json");
    assert.match(saved[0]?.digest ?? "", /^[0-9a-f]{64}$/);
    savedDigest = saved[0]?.digest ?? "";
    savedKey = saved[0]?.key ?? "";
    assert.equal((await cacheStore.lookup("acme", savedKey))?.savedBy, first.runId);
    assert.equal(ofCase(first.events, "cacheRestored").length, 0);
    // The saved event comes before the model's first step: nothing the model did is in it.
    const savedAt = first.events.findIndex((e) => e.payload.case === "cacheSaved");
    assert.ok(savedAt < firstModelText);
    // node_modules is the setup's output, not a change of the run: not in the patch.
    const patch = ofCase(first.events, "artifactEmitted").find(
      (a) => a.mediaType === "text/x-diff",
    );
    if (patch !== undefined) {
      const chunks: Uint8Array[] = [];
      for await (const c of artifacts.read(patch.digest)) chunks.push(c);
      assert.doesNotMatch(Buffer.concat(chunks).toString("utf8"), /node_modules/);
    }
    console.log(`# first setup: ${setup.output.durationMs} ms`);
  });

  it("a second run of the repository restores that cache, records it, and its setup is answered from it without running npm", async () => {
    assert.ok(first, "the first test ran");
    const second = await drive("acme", REPO);
    const restored = ofCase(second.events, "cacheRestored");
    assert.equal(restored.length, 1);
    assert.equal(restored[0]?.digest, savedDigest);
    assert.equal(restored[0]?.key, savedKey);
    assert.equal(restored[0]?.savedByRun, first.runId);
    assert.equal(restored[0]?.reason, "setup");
    const restoredAt = second.events.findIndex((e) => e.payload.case === "cacheRestored");
    const setupAt = second.events.findIndex((e) => e.payload.case === "toolCall");
    assert.ok(restoredAt < setupAt, "restored before the setup ran");
    const setup = resultOf(second.events, "setup_1");
    assert.equal(setup.output.exitCode, 0, String(setup.output.stderr));
    // An exact hit (same tenant, image build, line and inputs): the restored archive is the
    // setup's outcome. The call is decided and recorded, and answers from the cache.
    assert.equal(setup.output.cached, true, JSON.stringify(setup.output));
    assert.equal(setup.output.digest, savedDigest);
    assert.equal(setup.output.savedByRun, first.runId);
    assert.equal(setup.output.command, "npm install --no-save --prefer-offline");
    assert.match(String(setup.output.source), /package-lock\.json \(exact cache hit: .*not run\)/);
    const decided = ofCase(second.events, "policyDecision").filter((p) => p.callId === "setup_1");
    assert.equal(decided.length, 1, "the kernel decided the setup call");
    assert.equal(
      ofCase(second.events, "toolOutput").filter((o) => o.callId === "setup_1").length,
      0,
      "no process streamed output",
    );
    const ran = execs.filter((e) => e.runId === second.runId).map((e) => e.line);
    assert.ok(ran.length > 0, "the run's sandbox ran commands (the restore, the model's)");
    assert.ok(
      !ran.some((l) => /\bnpm (ci|install)\b/.test(l)),
      `npm never ran: ${ran.join(" | ")}`,
    );
    assert.deepEqual(
      ofCase(second.events, "networkRequest").filter((r) => r.callId === "setup_1"),
      [],
      "the setup made no request",
    );
    assert.match(String(resultOf(second.events, "use").output.stdout), /true/);
    assert.equal(ofCase(second.events, "cacheSaved").length, 0, "a hit is not saved again");
  });

  it("another tenant never gets acme's cache: it fetches and saves its own", async () => {
    assert.ok(savedKey, "the first test ran");
    const other = await drive("globex", REPO);
    assert.equal(ofCase(other.events, "cacheRestored").length, 0);
    const saved = ofCase(other.events, "cacheSaved");
    assert.equal(saved.length, 1);
    assert.notEqual(saved[0]?.key, savedKey, "the tenant is in the key");
    assert.equal(await cacheStore.lookup("globex", savedKey), undefined);
    assert.ok(
      ofCase(other.events, "networkRequest").some((r) => r.callId === "setup_1"),
      "its setup fetched from the registry",
    );
    assert.equal(readdirSync(join(dir, "depcache")).length, 2, "one folder per tenant");
  });

  it("a run that continues in a new container gets its own cache back and its setup again", async () => {
    assert.ok(savedDigest, "the first test ran");
    const run = await queue("acme", REPO);
    const stop = new AbortController();
    onAsk = () => stop.abort(); // released at the step boundary after this reply's call
    script = [callReply("look", "process.run", { command: "ls node_modules" })];
    const first = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), stop.signal);
    onAsk = undefined;
    assert.equal(first, "released");
    // The container is lost (a host restart): the next drive makes a new one.
    const box = await sandbox.find(run.runId);
    assert.ok(box, "the released run kept its container");
    await box.destroy();
    script = [
      callReply("use", "process.run", { command: `node -p "require('is-number')(5)"` }),
      sayReply("done"),
    ];
    const outcome = await driveRun(
      deps(),
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    const events = (await log.read(run.runId, 0)).map((e) => e.event);
    assert.equal(outcome, "completed");
    const restored = ofCase(events, "cacheRestored");
    assert.deepEqual(
      restored.map((r) => [r.reason, r.digest]),
      [
        ["setup", savedDigest],
        ["resume", savedDigest],
      ],
    );
    const setups = ofCase(events, "toolCall").filter((c) => c.tool === "setup.run");
    assert.deepEqual(
      setups.map((c) => c.callId),
      ["setup_1", "setup_2"],
    );
    assert.equal(resultOf(events, "setup_2").output.exitCode, 0);
    assert.ok(
      ofCase(events, "outputMessage").some((m) => /continues in a new container/.test(m.text)),
    );
    assert.match(String(resultOf(events, "use").output.stdout), /true/);
    assert.equal(ofCase(events, "cacheSaved").length, 0);
  });

  it("a policy that asks a person for setup.run holds the run until approved, then runs it", async () => {
    const p: Policy = {
      ...policy,
      capabilities: { ...policy.capabilities, "setup.run": { approval: "always" } },
    };
    const run = await queue("initech", REPO);
    const stop = new AbortController();
    const asked: string[] = [];
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const v = ev.event.payload;
        if (v.case !== "approvalRequested") continue;
        asked.push(`${v.value.tool} ${v.value.callId} ${v.value.preview?.summary ?? ""}`);
        await approveInLog(log, run, v.value.approvalId);
      }
    })();
    script = [
      callReply("use", "process.run", { command: `node -p "require('is-number')(5)"` }),
      sayReply("done"),
    ];
    const d = stubDriverDeps(
      { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
      { depCache: cacheStore, approvalHoldMs: 120_000 },
    );
    const outcome = await driveRun(
      d,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    stop.abort();
    await approver.catch(() => undefined);
    const events = (await log.read(run.runId, 0)).map((e) => e.event);
    assert.equal(outcome, "completed");
    assert.equal(asked.length, 1, asked.join("\n"));
    assert.match(asked[0] ?? "", /^setup\.run setup_1 .*npm ci/);
    const approvedAt = events.findIndex((e) => e.payload.case === "approvalResolved");
    const resultAt = events.findIndex(
      (e) => e.payload.case === "toolResult" && e.payload.value.callId === "setup_1",
    );
    assert.ok(approvedAt > 0 && approvedAt < resultAt, "ran after the approval");
    assert.equal(resultOf(events, "setup_1").output.exitCode, 0);
    assert.match(String(resultOf(events, "use").output.stdout), /true/);
  });

  it("a setup behind an approval over a restored node_modules runs the line the person approved", async () => {
    assert.ok(savedDigest, "the first test ran");
    const p: Policy = {
      ...policy,
      capabilities: { ...policy.capabilities, "setup.run": { approval: "always" } },
    };
    const run = await queue("acme", REPO);
    const stop = new AbortController();
    const asked: string[] = [];
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const v = ev.event.payload;
        if (v.case !== "approvalRequested") continue;
        asked.push(v.value.preview?.summary ?? "");
        await approveInLog(log, run, v.value.approvalId);
      }
    })();
    script = [
      callReply("use", "process.run", { command: `node -p "require('is-number')(5)"` }),
      sayReply("done"),
    ];
    const d = stubDriverDeps(
      { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
      { depCache: cacheStore, approvalHoldMs: 120_000 },
    );
    const outcome = await driveRun(
      d,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    stop.abort();
    await approver.catch(() => undefined);
    const events = (await log.read(run.runId, 0)).map((e) => e.event);
    assert.equal(outcome, "completed");
    assert.equal(ofCase(events, "cacheRestored").length, 1, "the tree came back");
    assert.equal(asked.length, 1, asked.join("\n"));
    assert.match(
      asked[0] ?? "",
      /npm install --no-save/,
      "the person was asked about the warm line",
    );
    const ran = String(resultOf(events, "setup_1").output.command);
    assert.ok(asked[0]?.includes(ran), `approved ${JSON.stringify(asked[0])}, ran ${ran}`);
    // An exact hit: once approved, the call answers from the cache the person was shown.
    assert.equal(resultOf(events, "setup_1").output.cached, true);
  });

  it("past the tenant's bound the least recently used entry is evicted, and recorded; an archive past it is not saved", async () => {
    assert.ok(savedKey, "the first test ran");
    const size = Number((await cacheStore.lookup("acme", savedKey))?.size ?? 0);
    assert.ok(size > 0);
    // Room for one archive of this size, not two.
    const small = createFsCacheStore({ dir: join(dir, "small"), maxBytes: Math.floor(size * 1.5) });
    const renamed = (name: string) => ({
      "package.json": PACKAGE_JSON.replace("setup-fixture", name),
      "package-lock.json": PACKAGE_LOCK.replaceAll("setup-fixture", name),
    });
    const a = await drive("acme", renamed("fixture-a"), undefined, small);
    const keyA = ofCase(a.events, "cacheSaved")[0]?.key ?? "";
    assert.match(keyA, /^[0-9a-f]{64}$/);
    const b = await drive("acme", renamed("fixture-b"), undefined, small);
    const savedB = ofCase(b.events, "cacheSaved")[0];
    assert.ok(savedB, "the second repository's cache is saved");
    assert.deepEqual(savedB.evicted, [keyA]);
    assert.equal(await small.lookup("acme", keyA), undefined);
    assert.ok(await small.lookup("acme", savedB.key));
    // A bound smaller than one archive: nothing is saved, the run is unaffected.
    const tiny = createFsCacheStore({ dir: join(dir, "tiny"), maxBytes: 1024 });
    const c = await drive("acme", REPO, undefined, tiny);
    assert.equal(ofCase(c.events, "cacheSaved").length, 0);
    assert.equal(resultOf(c.events, "setup_1").output.exitCode, 0);
  });

  it("a cache tar unpacks only in part is not recorded as restored, and the run does not save it as its own", async () => {
    // Passes checkArchive (every member under cache/), but tar cannot make cache/planted/below
    // below the file cache/planted: it exits non-zero after cache/planted is in /cache.
    const pack = tarStream.pack();
    const out: Buffer[] = [];
    pack.on("data", (c: unknown) => out.push(c as Buffer));
    const ended = new Promise<void>((r) => pack.on("end", () => r()));
    pack.entry({ name: "cache/", type: "directory" });
    pack.entry({ name: "cache/planted" }, "from another run");
    pack.entry({ name: "cache/planted/below" }, "x");
    pack.finalize();
    await ended;
    const half = Buffer.concat(out);
    const store: DepCacheStore = {
      maxBytes: cacheStore.maxBytes,
      lookup: async (_tenant, key) => ({
        key,
        digest: "ab".repeat(32),
        size: half.byteLength,
        savedBy: "01PLANTED",
      }),
      read: async () => half,
      save: (tenant, key, data, savedBy) => cacheStore.save(tenant, key, data, savedBy),
    };
    const run = await drive("umbrella", REPO, undefined, store);
    assert.equal(resultOf(run.events, "setup_1").output.exitCode, 0);
    assert.equal(ofCase(run.events, "cacheRestored").length, 0);
    assert.equal(
      ofCase(run.events, "cacheSaved").length,
      0,
      "cache/planted would be saved as this run's, no event naming where it came from",
    );
  });

  it("a cache made in one build of an image is not restored into another build under the same tag", async () => {
    // The operator's sandbox.image is a tag; `make images` (or a pull) moves it to a new
    // build: a node_modules made there (native addons, another Node) must not come back.
    const tag = `agentd-review-cache-${ulid().toLowerCase()}:latest`;
    const docker = new Docker();
    const baseImage = policy.sandbox.image as string;
    const [repo, version] = tag.split(":") as [string, string];
    await docker.getImage(baseImage).tag({ repo, tag: version });
    try {
      const p: Policy = { ...policy, sandbox: { ...policy.sandbox, image: tag } };
      const one = await drive("wayne", REPO, p);
      assert.equal(ofCase(one.events, "cacheSaved").length, 1);
      // The tag moves to a new build (a label is enough for another image id).
      const built = execFileSync("docker", ["build", "-q", "-t", tag, "-"], {
        input: `FROM ${baseImage}\nLABEL agentd.review.build="${ulid()}"\n`,
      });
      assert.match(built.toString(), /sha256:/);
      const two = await drive("wayne", REPO, p);
      assert.equal(
        ofCase(two.events, "cacheRestored").length,
        0,
        "the first build's cache came back into the second",
      );
      assert.equal(ofCase(two.events, "cacheSaved").length, 1);
      assert.notEqual(
        ofCase(two.events, "cacheSaved")[0]?.key,
        ofCase(one.events, "cacheSaved")[0]?.key,
      );
    } finally {
      await docker
        .getImage(tag)
        .remove({ noprune: false })
        .catch(() => undefined);
    }
  });

  it("a hostile commands.setup is refused by the kernel, the model is told, the run goes on", async () => {
    const bad = await drive("acme", {
      ...REPO,
      ".agent/config.yaml": "commands:\n  setup: sudo npm ci\n",
    });
    const setup = resultOf(bad.events, "setup_1");
    assert.equal(setup.ok, false);
    const decision = ofCase(bad.events, "policyDecision").find((d) => d.callId === "setup_1");
    assert.match(decision?.rule ?? "", /denyCommands/);
    const notice = ofCase(bad.events, "outputMessage").find(
      (m) => m.role === "system" && /setup step/.test(m.text),
    );
    assert.match(notice?.text ?? "", /sudo npm ci.*\.agent\/config\.yaml commands\.setup/);
    assert.equal(ofCase(bad.events, "cacheSaved").length, 0);
    assert.equal(
      ofCase(bad.events, "cacheRestored").length,
      0,
      "no cache for a refused setup's key",
    );
  });
});
