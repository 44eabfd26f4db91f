/**
 * ATTACK (review of issue #27 deliverable 1 after f0328b1): a run a secret-carrying call ran
 * in no longer snapshots on pause; it keeps its container, which holds the secret (the
 * held file, the container's kernel state). A paused run has no worker, so CancelRun ends it
 * in the log alone (api/cancel-run.ts cancelStep appends run.cancelled) and nothing removes
 * that container but the reaper of cmd/agentd/main.ts, once a minute. DeleteRun is allowed
 * as soon as the run ended (lifecycle/delete-run.ts) — and from the tombstone on the run is
 * unknown, which the reaper's predicate (`run === undefined || !isTerminal(run.state)`)
 * reads as "another deployment's container: never ours to remove". So `cancel` then
 * `delete` of a paused secret run leaves its container, with the secret in its workspace,
 * running on the host forever, tied to no run any API or sweep knows of. Before f0328b1 a
 * paused run had no container.
 * What must hold: a paused run's kept container goes when the run ends or is deleted (e.g.
 * DeleteRun or cancel removes it, or the reaper treats a tombstoned run as ended).
 *
 * The reaper is called here exactly as main.ts calls it (RunProjectionCache over the log,
 * the same predicate: lifecycle/run-live.ts). Must never: fake the sandbox, the kernel, the log or the store.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { RunCancelledSchema } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import { deleteRun } from "../lifecycle/delete-run.ts";
import { FileRunDeletion } from "../lifecycle/file-run-deletion.ts";
import { runIsLive } from "../lifecycle/run-live.ts";
import { RunProjectionCache } from "../projections/run-cache.ts";
import { LABEL_RUN } from "../sandbox/docker-sandbox.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { approveInLog, callReply, queueRun, testImagePolicy } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const SECRET = "keptBox-Value-55221-Zq";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-kept-box-"));
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

/** Containers (any state) labelled with the run's id. */
const containersOf = (runId: string): string[] =>
  execFileSync("docker", ["ps", "-aq", "--filter", `label=${LABEL_RUN}=${runId}`], {
    encoding: "utf8",
  })
    .split("\n")
    .filter((l) => l !== "");

describe("attack: a paused secret run's kept container outlives cancel + delete", () => {
  it("the reaper never removes it once the run is deleted", async () => {
    const ws = await artifacts.put(
      await packWorkspace([
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
    };
    const fenced = async () =>
      driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);

    // The secret call asks, is approved and runs; the next exec asks: the run pauses with
    // its container kept (no snapshot).
    script = [callReply("w", "process.run", { command: 'printf %s "$ENV.DEMO_TOKEN" > tok.txt' })];
    assert.equal(await fenced(), "paused");
    await approveLast();
    script = [callReply("r", "process.run", { command: "true" })];
    assert.equal(await fenced(), "paused");
    assert.equal(containersOf(run.runId).length, 1, "the paused secret run keeps its container");

    // CancelRun of a paused run: the server appends run.cancelled on the head it read.
    const head = await log.head(run.runId);
    await log.append({
      runId: run.runId,
      sessionId: run.sessionId,
      expectedSeq: head?.seq,
      payload: {
        case: "runCancelled",
        value: create(RunCancelledSchema, { reason: "no", cancelledBy: "alice" }),
      },
    });
    // DeleteRun right after (allowed: the run ended).
    const deletion = new FileRunDeletion({ log });
    await deleteRun(
      { store: deletion, artifacts: [artifacts] },
      { runId: run.runId, by: "alice", reason: "cleanup" },
    );

    // The reaper, exactly as cmd/agentd/main.ts runs it every minute.
    const runs = new RunProjectionCache({ log });
    await sandbox.reap(runIsLive(runs, deletion));
    assert.deepEqual(
      containersOf(run.runId),
      [],
      "the container holding the secret outlives the run: no reaper, cancel or delete removes it",
    );
  });
});
