/**
 * Does a held file reach the tenant's shared dependency cache? Real parts: the run driver,
 * the kernel, a file event log, a real Docker sandbox (the test image), a real directory
 * cache store. The npm save archives /cache and /workspace/node_modules (cache-transfer.ts).
 * Two ways a secret could be in those trees when the first setup's save runs, both checked
 * on the archive the store keeps:
 *
 *   1. the setup line itself names `$ENV.DEMO_TOKEN` and writes it under node_modules and
 *      /cache: setup.run resolves no placeholder (its input is `{}`; the line is the
 *      policy's), so the setup carries no secret, nothing is held, and the saved archive
 *      holds the probe files without the value;
 *   2. the run already holds a secret in /workspace/node_modules when its setup comes (as a
 *      log a taker reads could say): the setup waits for a person (secret.containment), and
 *      after the approval nothing is saved — the tenant's cache stays empty.
 *
 * Must never: fake the sandbox, the kernel, the log or the cache store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as tarStream from "tar-stream";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createFsCacheStore } from "../depcache/fs-cache-store.ts";
import type { DepCacheStore } from "../depcache/port.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { type Event, SecretFileSchema, SecretWrittenSchema } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { approveInLog, queueRun, sayReply, testImagePolicy } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const SECRET = "cacheSecret-Value-13579-Zy";
/** A lockfile of its own per test: a cache key no other test's save shares. */
const lock = (name: string) => JSON.stringify({ name, lockfileVersion: 3, packages: { "": {} } });
const PROBE =
  'mkdir -p node_modules/probe /cache/probe && printf %s "$ENV.DEMO_TOKEN" | rev > node_modules/probe/t && printf %s "$ENV.DEMO_TOKEN" > /cache/probe/t';

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let cacheStore: DepCacheStore;
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-setup-secret-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  const t = await testSandbox();
  cleanup = t.cleanup;
  sandbox = t.sandbox;
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  cacheStore = createFsCacheStore({ dir: join(dir, "depcache"), maxBytes: 16 * 1024 ** 2 });
  const base = testImagePolicy();
  policy = {
    ...base,
    secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
    tools: { ...base.tools, setup: PROBE },
  };
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Drives a queued run of tenant acme, approving every approval it asks for. */
async function drive(
  name: string,
  seed?: (run: { runId: string; sessionId: string }) => Promise<void>,
) {
  const tar = await packWorkspace([
    { path: "package.json", type: "file", mode: 0o644, data: Buffer.from("{}") },
    { path: "package-lock.json", type: "file", mode: 0o644, data: Buffer.from(lock(name)) },
  ]);
  const info = await artifacts.put(tar);
  const run = await queueRun(log, {
    prompt: "p",
    workspaceDigest: info.digest,
    workspaceSizeBytes: info.size,
  });
  await seed?.(run);
  const stop = new AbortController();
  const asked: string[] = [];
  const approver = (async () => {
    for await (const ev of log.follow(run.runId, 0, stop.signal)) {
      const v = ev.event.payload;
      if (v.case !== "approvalRequested") continue;
      asked.push(`${v.value.callId} ${v.value.preview?.summary ?? ""}`);
      await approveInLog(log, run, v.value.approvalId);
    }
  })();
  script = [sayReply("done")];
  const deps = stubDriverDeps(
    {
      log,
      policy,
      sandbox,
      artifacts,
      baseURL: stub.baseURL,
      secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
    },
    { depCache: cacheStore, approvalHoldMs: 120_000 },
  );
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  stop.abort();
  await approver.catch(() => undefined);
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  return { outcome, events, asked };
}

const ofCase = <C extends Event["payload"]["case"]>(events: Event[], c: C) =>
  events.filter((e) => e.payload.case === c).map((e) => e.payload.value) as Extract<
    Event["payload"],
    { case: C }
  >["value"][];

const show = (v: unknown): string =>
  JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? String(x) : x)).slice(0, 3000);

/** Member name → content of a stored cache archive. */
async function members(data: Uint8Array): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const extract = tarStream.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (h, stream, next) => {
      const parts: Buffer[] = [];
      stream.on("data", (c: unknown) => parts.push(c as Buffer));
      stream.on("end", () => {
        out.set(h.name.replace(/^\.\//, "").replace(/\/$/, ""), Buffer.concat(parts).toString());
        next();
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  extract.end(Buffer.from(data));
  await done;
  return out;
}

describe("a held file never reaches the tenant's shared dependency cache", () => {
  it("a setup line naming $ENV.X carries no secret: nothing is held, and the saved /cache and node_modules hold no value", async () => {
    const { outcome, events, asked } = await drive("plain");
    assert.equal(outcome, "completed", `${JSON.stringify(asked)} ${show(events.slice(-4))}`);
    const result = ofCase(events, "toolResult").find((r) => r.callId === "setup_1");
    assert.equal(result?.ok, true, show(result));
    assert.deepEqual(ofCase(events, "secretWritten"), [], "the setup carried no secret");
    const saved = ofCase(events, "cacheSaved");
    assert.equal(saved.length, 1, "the setup's state was saved");
    assert.equal(saved[0]?.ecosystem, "npm", "node_modules is part of the save");
    const data = await cacheStore.read("acme", saved[0]?.digest ?? "");
    assert.ok(data, "the store keeps the archive");
    const m = await members(data);
    // The probes are in the archive (the trees were saved) but hold no value.
    assert.ok(m.has("workspace/node_modules/probe/t"), [...m.keys()].join(", "));
    assert.ok(m.has("cache/probe/t"), [...m.keys()].join(", "));
    const all = Buffer.from(data).toString("latin1");
    const reversed = [...SECRET].reverse().join("");
    assert.equal(all.includes(SECRET), false, "the value is not in the shared cache");
    assert.equal(all.includes(reversed), false, "nor reversed");
  });

  it("a run that holds a secret in node_modules when its setup comes saves nothing for other runs", async () => {
    const { outcome, events, asked } = await drive("held", async (run) => {
      // What a log says when a call that carried a secret wrote node_modules (unknown: no
      // scan ends it).
      await log.append({
        runId: run.runId,
        sessionId: run.sessionId,
        payload: {
          case: "secretWritten",
          value: create(SecretWrittenSchema, {
            callId: "c0",
            files: [
              create(SecretFileSchema, {
                path: "/workspace/node_modules/probe/held",
                digest: "unknown",
                before: "",
              }),
            ],
          }),
        },
      });
    });
    assert.equal(outcome, "completed", `${JSON.stringify(asked)} ${show(events.slice(-4))}`);
    assert.ok(
      asked.some((a) => a.startsWith("setup_1 ") && /may hold a secret/.test(a)),
      `the setup waited for a person: ${JSON.stringify(asked)}`,
    );
    const result = ofCase(events, "toolResult").find((r) => r.callId === "setup_1");
    assert.equal(result?.ok, true, show(result));
    assert.deepEqual(ofCase(events, "cacheRestored"), [], "nothing restored (a fresh key)");
    assert.deepEqual(ofCase(events, "cacheSaved"), [], "nothing saved");
  });
});
