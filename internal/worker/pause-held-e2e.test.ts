/**
 * A run that holds a secret pauses and resumes, end to end (the run driver, the kernel, a
 * file event log, a real artifact store, real containers): a person approves a call that
 * writes the secret (reversed: no form a mask knows) into an uploaded file; the model's next
 * exec waits for a person (secret.containment) and the run pauses — its workspace snapshot
 * leaves that file out; approved, the run resumes in a new container from the snapshot,
 * where the file is absent: the approved exec reads nothing of it, and neither the snapshot,
 * the log nor the final patch holds the value in any form.
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
  it("the snapshot leaves the held file out, the resumed run has it absent, and no artifact or event holds the value", async () => {
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
    const approveLast = async () => {
      const asked = (await payloads()).filter((p) => p.case === "approvalRequested").at(-1);
      assert.ok(asked?.case === "approvalRequested", "an approval is pending");
      await approveInLog(log, run, asked.value.approvalId);
      return asked.value;
    };
    const fenced = async () =>
      driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);

    // 1. The secret call asks a person (it touches a secret): the run pauses before it.
    script = [
      callReply("w", "process.run", {
        command: 'printf %s "$ENV.DEMO_TOKEN" | rev > setup.cfg',
      }),
    ];
    assert.equal(await fenced(), "paused");
    await approveLast();
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
      /holds a secret in paths in \/workspace \(which and how many: held/,
    );
    const snapshot = all2
      .filter((p) => p.case === "artifactEmitted" && p.value.name === SNAPSHOT)
      .at(-1);
    assert.ok(snapshot?.case === "artifactEmitted", "the pause stored a snapshot");
    const tar = await readAll(snapshot.value.digest);
    assert.ok(tar.includes("hello.txt"), "the rest of the workspace is in the snapshot");
    assert.equal(tar.includes("setup.cfg"), false, "the held file is not");
    assert.equal(tar.includes(REVERSED), false, "no held byte is");
    // 3. Resumed from the snapshot in a new container: the approved exec finds no held byte.
    script = [sayReply("done")];
    assert.equal(await fenced(), "completed");
    const all3 = await payloads();
    const read = all3.find((p) => p.case === "toolResult" && p.value.callId === "r");
    assert.ok(read?.case === "toolResult", "the approved exec ran");
    assert.match(read.value.outputJson, /hello/);
    assert.match(read.value.outputJson, /setup\.cfg.*No such file/);
    const json = JSON.stringify(all3, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    assert.equal(json.includes(REVERSED), false, "no event holds the value");
    const patch = all3
      .filter((p) => p.case === "artifactEmitted" && p.value.name === "patch")
      .at(-1);
    if (patch?.case === "artifactEmitted")
      assert.equal((await readAll(patch.value.digest)).includes(REVERSED), false);
  });
});
