/**
 * A run that holds a secret pauses and resumes, end to end (the run driver, the kernel, a
 * file event log, a real artifact store, real containers): the model changes a file, then
 * a person approves a call that writes the secret (reversed: no form a mask knows) into an
 * uploaded file; the model's next exec waits for a person (secret.containment) and the run
 * pauses, without a snapshot (which files one leaves out would tell which ones the secret
 * call touched): the container stays, and the resumed run finds it. The final patch is the
 * run's changes up to the secret call; no artifact and no event but the approved read's
 * result holds the value.
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { nameKey } from "../kernel/held-names.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { WITHHELD_AFTER_SECRET } from "./before-secret.ts";
import { SNAPSHOT } from "./run-artifacts.ts";
import { driveRun } from "./run-driver.ts";

const SECRET = "pauseSecret-Value-11235-Kq";
const REVERSED = [...SECRET].reverse().join("");

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-pause-held-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(
    () => script.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } },
  );
  const t = await testSandbox();
  cleanup = t.cleanup;
  sandbox = t.sandbox;
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  policy = {
    ...testImagePolicy(),
    secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
  };
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const readAll = async (digest: string): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const c of artifacts.read(digest)) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks).toString("latin1");
};

describe("a run holding a secret pauses and resumes", () => {
  it("keeps its container (no snapshot); the final patch is the run's changes up to the secret call", async () => {
    const ws = await artifacts.put(
      await packWorkspace([
        { path: "setup.cfg", type: "file", mode: 0o644, data: Buffer.from("[base]\n") },
        { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
      ]),
    );
    const run = await queueRun(log, {
      prompt: "p",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
    });
    const deps = stubDriverDeps({
      log,
      policy,
      sandbox,
      artifacts,
      baseURL: stub.baseURL,
      secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
    });
    const payloads = async () => (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const pending = async () => {
      const all = await payloads();
      const asked = all.filter((p) => p.case === "approvalRequested").at(-1);
      if (asked?.case !== "approvalRequested") return undefined;
      const done = all.some(
        (p) => p.case === "approvalResolved" && p.value.approvalId === asked.value.approvalId,
      );
      return done ? undefined : asked.value;
    };
    const approveLast = async () => {
      const asked = await pending();
      assert.ok(asked !== undefined, "an approval is pending");
      await approveInLog(log, run, asked.approvalId);
      return asked;
    };
    const fenced = async () =>
      driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);

    // 1. The model's own change (approved if the policy asks), then the secret call asks.
    script = [
      callReply("e", "repo.patch", {
        path: "hello.txt",
        edits: [{ oldText: "hello", newText: "hello world" }],
      }),
      callReply("w", "process.run", {
        command: 'printf %s "$ENV.DEMO_TOKEN" | rev > setup.cfg',
      }),
    ];
    assert.equal(await fenced(), "paused");
    if ((await pending())?.callId === "e") {
      await approveLast();
      assert.equal(await fenced(), "paused");
    }
    assert.equal((await approveLast()).callId, "w");
    // 2. It runs; the model's next exec asks (the run holds a secret): the run pauses again.
    script = [callReply("r", "process.run", { command: "cat setup.cfg hello.txt" })];
    assert.equal(await fenced(), "paused");
    const all2 = await payloads();
    const held = all2.filter((p) => p.case === "secretWritten" && p.value.callId === "w").at(-1);
    const heldKey = nameKey(await log.runNameKey(run.runId));
    assert.ok(
      held?.case === "secretWritten" &&
        held.value.files.some(
          (f) => f.path === `/workspace//${heldKey.id}.${heldKey.mac("/workspace/setup.cfg")}`,
        ),
      "setup.cfg is held by its keyed name",
    );
    assert.equal(JSON.stringify(held?.value).includes("setup.cfg"), false, "a clear path");
    const asked = await approveLast();
    assert.match(
      asked.preview?.summary ?? "",
      /paths in \/workspace, \/tmp, \/cache, \/dev\/shm and elsewhere \(which, where and how many: held\)/,
    );
    assert.equal(
      all2
        .slice(all2.findIndex((p) => p.case === "secretWritten"))
        .some((p) => p.case === "artifactEmitted" && p.value.name === SNAPSHOT),
      false,
      "no snapshot once a secret-carrying call ran",
    );
    // 3. Resumed in the same container: the exec a person approved reads the held file.
    script = [sayReply("done")];
    assert.equal(await fenced(), "completed");
    const all3 = await payloads();
    const read = all3.find((p) => p.case === "toolResult" && p.value.callId === "r");
    assert.ok(read?.case === "toolResult", "the approved exec ran");
    assert.match(read.value.outputJson, /hello world/);
    const others = all3.filter((p) => !(p.case === "toolResult" && p.value.callId === "r"));
    const json = JSON.stringify(others, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    assert.equal(json.includes(REVERSED), false, "only the approved read's result holds it");
    const done = all3.at(-1);
    assert.ok(done?.case === "runCompleted");
    assert.deepEqual(
      done.value.patchOmitted.map((o) => o.path),
      [WITHHELD_AFTER_SECRET.path],
    );
    const patch = await readAll(done.value.patchDigest);
    assert.match(patch, /\+hello world/, "the change made before the secret call");
    assert.equal(patch.includes("setup.cfg"), false, "nothing from the secret call on");
    assert.equal(patch.includes(REVERSED), false);
  });
});
