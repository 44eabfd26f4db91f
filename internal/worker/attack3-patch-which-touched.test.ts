/**
 * ATTACK (third review of issue #27 deliverable 1): which files the final patch carries
 * must not be the secret-carrying program's choice. Before any secret, the model's own
 * calls make b/0 … b/N (each in the patch); then a person approves a call that touches
 * b/i for every 1 bit of the value (`touch`, no content change). A patch that left out the
 * files the call held and kept the others would list exactly the 0 bits: `git apply` and
 * one decode give the value back. What must hold (worker/before-secret.ts): the final patch
 * is the run's changes up to the first secret-carrying call, whatever that call did, and
 * says everything from it on is withheld.
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
import { driveRun } from "./run-driver.ts";

const SECRET = "Touch-Bits-77";
const BITS = SECRET.length * 8;

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-which-touched-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(
    () => script.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } },
  );
  const t = await testSandbox();
  cleanup = t.cleanup;
  sandbox = t.sandbox;
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
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

/** The approved program: touches b/(8i+j) for every 1 bit of the value. */
const TOUCH_BITS = [
  'i=0; for c in $(printf %s "$ENV.DEMO_TOKEN" | od -An -v -tu1); do',
  "j=0; while [ $j -lt 8 ]; do",
  "if [ $(( (c >> (7 - j)) & 1 )) -eq 1 ]; then touch b/$((i * 8 + j)); fi;",
  "j=$((j + 1)); done; i=$((i + 1)); done",
].join(" ");

describe("attack: which files the final patch carries spells the secret", () => {
  it("the patch is the run's changes before the secret call: every b/N, whatever it touched", async () => {
    const ws = await artifacts.put(
      await packWorkspace([
        { path: "README", type: "file", mode: 0o644, data: Buffer.from("r\n") },
      ]),
    );
    const run = await queueRun(log, {
      prompt: "p",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
    });
    const deps = stubDriverDeps({
      log,
      policy: {
        ...testImagePolicy(),
        secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
      },
      sandbox,
      artifacts,
      baseURL: stub.baseURL,
      secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
    });
    script = [
      callReply("m", "process.run", {
        command: `mkdir -p b && i=0; while [ $i -lt ${BITS} ]; do echo x > b/$i; i=$((i+1)); done`,
      }),
      callReply("w", "process.run", { command: TOUCH_BITS }),
      sayReply("done"),
    ];
    // Every approval is given (a person who does not read the loop closely).
    let outcome = "";
    for (let i = 0; i < 10; i++) {
      outcome = await driveRun(
        deps,
        run.runId,
        await log.bumpEpoch(run.runId),
        AbortSignal.timeout(600_000),
      );
      if (outcome !== "paused") break;
      const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
      const asked = events.filter((p) => p.case === "approvalRequested").at(-1);
      assert.ok(asked?.case === "approvalRequested", "paused for a person");
      await approveInLog(log, run, asked.value.approvalId);
    }
    assert.equal(outcome, "completed");
    const payloads = (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const w = payloads.find((p) => p.case === "toolResult" && p.value.callId === "w");
    assert.ok(w?.case === "toolResult" && w.value.outputJson.includes('"exitCode":0'), "it ran");
    const done = payloads.at(-1);
    assert.ok(done?.case === "runCompleted");
    const patch = await readAll(done.value.patchDigest);
    const inPatch = new Set<number>();
    for (const m of patch.matchAll(/^\+\+\+ b\/b\/(\d+)$/gm)) inPatch.add(Number(m[1]));
    assert.equal(inPatch.size, BITS, "every file the run made before the secret call");
    assert.deepEqual(
      done.value.patchOmitted.map((o) => o.path),
      [WITHHELD_AFTER_SECRET.path],
    );
  });
});
