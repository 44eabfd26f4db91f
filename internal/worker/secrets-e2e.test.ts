/**
 * A secret stays secret for the whole run (invariant 9), against real parts: a scripted
 * model writes `$ENV.DEMO_TOKEN` into a file in one call, then reads it back in later
 * calls and drives — plain, base64, hex dumps, reversed, upper-cased — and after a release
 * and a takeover by a fresh drive. The value must be in no event, no model request, no file
 * of the data directory and not in the patch (which says it was redacted).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { ToolCallSchema } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
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
import { type DriverDeps, driveRun } from "./run-driver.ts";

const SECRET = "Sk3leton-Key-4242-tango";
let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
/** Called before each model request is answered (a test can stop a drive at that point). */
let onAsk: (() => void) | undefined;
let cleanup: () => Promise<void>;
let deps: () => DriverDeps;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-secrets-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => {
    onAsk?.();
    return script.shift() ?? { status: 500, body: {} };
  });
  const t = await testSandbox();
  cleanup = t.cleanup;
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const base = testImagePolicy();
  const policy: Policy = {
    ...base,
    secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
  };
  const providers = [createEnvSecretProvider({ DEMO_TOKEN: SECRET })];
  // Every drive gets a fresh kernel: nothing carries over in memory between drives.
  deps = () =>
    stubDriverDeps(
      {
        log,
        policy,
        sandbox: t.sandbox,
        artifacts,
        baseURL: stub.baseURL,
        secretProviders: providers,
      },
      { approvalHoldMs: 30_000 },
    );
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every file under `root`, as text (latin1: bytes as they are). */
function filesUnder(root: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const name of readdirSync(root)) {
    const p = join(root, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push({ path: p, text: readFileSync(p).toString("latin1") });
  }
  return out;
}

/** The forms the review greps for. */
const FORMS = [
  SECRET,
  SECRET.toUpperCase(),
  SECRET.toLowerCase(),
  [...SECRET].reverse().join(""),
  Buffer.from(SECRET).toString("base64"),
  Buffer.from(SECRET).toString("base64url"),
  Buffer.from(SECRET).toString("hex"),
  Buffer.from(SECRET).toString("hex").toUpperCase(),
  encodeURIComponent(SECRET),
];

describe("a secret resolved in one call", () => {
  it("is redacted from every later output, event, model request, data file and the patch", async () => {
    const ws = await packWorkspace([
      { path: "README", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
    ]);
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(ws);
    const run = await queueRun(log, {
      prompt: "store the token",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const stop = new AbortController();
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case === "approvalRequested") await approveInLog(log, run, p.value.approvalId);
      }
    })();
    // Drive 1: the placeholder is resolved into a file; the worker stops while the model
    // answers its next step (a harmless read), so the drive is released after it.
    script = [
      callReply("w1", "process.run", { command: "printf %s '$ENV.DEMO_TOKEN' > tok.txt" }),
      callReply("r1", "repo.read", { path: "README" }),
    ];
    const release = new AbortController();
    let asked = 0;
    onAsk = () => {
      if (++asked === 2) release.abort();
    };
    const first = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), release.signal);
    onAsk = undefined;
    assert.equal(first, "released");
    // Drive 2 (a takeover by a fresh kernel): later calls read the value back in many forms.
    const reads = [
      "cat tok.txt",
      "base64 tok.txt",
      "xxd tok.txt",
      "xxd -p tok.txt",
      "od -A x -t x1z tok.txt",
      "hexdump -C tok.txt",
      "rev tok.txt",
      "tr a-z A-Z < tok.txt",
      "tr A-Z a-z < tok.txt",
    ];
    script = [
      callReply("r0", "repo.read", { path: "tok.txt" }),
      callReply("s0", "repo.search", { query: "Sk3" }),
      ...reads.map((command, i) => callReply(`x${i}`, "process.run", { command })),
      sayReply(`done`),
    ];
    const outcome = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), stop.signal);
    stop.abort();
    await approver;
    assert.equal(outcome, "completed");

    const events = await log.read(run.runId, 0);
    assert.equal(verifyChain(events.map((e) => e.json)).ok, true);
    const outputs = events
      .filter((e) => e.event.payload.case === "toolResult")
      .map((e) => (e.event.payload.value as { outputJson: string }).outputJson);
    assert.ok(
      outputs.filter((o) => o.includes("[REDACTED]")).length >= reads.length,
      "the reads happened and were redacted",
    );
    const places = [
      ...events.map((e) => ({ path: `event ${e.event.seq} ${e.type}`, text: e.json })),
      ...stub.requests.map((r, i) => ({
        path: `model request ${i}`,
        text: JSON.stringify(r.body),
      })),
      ...filesUnder(dir),
    ];
    for (const { path, text } of places)
      for (const form of FORMS)
        assert.ok(!text.includes(form), `${JSON.stringify(form)} in ${path}`);
    const completed = events.at(-1)?.event.payload;
    assert.ok(completed?.case === "runCompleted");
    assert.equal(completed.value.patchRedacted, true);
    assert.deepEqual(completed.value.patchRedactedFiles, ["tok.txt"]);
  });
});

describe("a paused run's snapshot", () => {
  it("holds no secret value: a file the run wrote with one has it masked after the resume", async () => {
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(await packWorkspace([]));
    const run = await queueRun(log, {
      prompt: "pause with a secret",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const pausing = () => ({ ...deps(), approvalHoldMs: 0 });
    const drive = async () =>
      driveRun(pausing(), run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);
    const approveLast = async () => {
      const req = (await log.read(run.runId, 0)).findLast(
        (e) => e.event.payload.case === "approvalRequested",
      );
      assert.ok(req?.event.payload.case === "approvalRequested");
      await approveInLog(log, run, req.event.payload.value.approvalId);
    };
    // The write asks (a placeholder touches secrets), then rm asks: two real pauses.
    script = [callReply("w", "process.run", { command: "printf %s '$ENV.DEMO_TOKEN' > tok.txt" })];
    assert.equal(await drive(), "paused");
    await approveLast();
    script = [callReply("rm", "process.run", { command: "rm -f nothing.txt" })];
    assert.equal(await drive(), "paused", "paused again, the secret now in a file");
    await approveLast();
    script = [
      callReply("c", "process.run", { command: "cat tok.txt; echo; wc -c < tok.txt" }),
      sayReply("ok"),
    ];
    assert.equal(await drive(), "completed");
    const results = (await log.read(run.runId, 0)).flatMap((e) =>
      e.event.payload.case === "toolResult" && e.event.payload.value.callId === "c"
        ? [e.event.payload.value]
        : [],
    );
    const out = JSON.parse(results[0]?.outputJson ?? "{}") as {
      result?: { stdout: string };
      stdout?: string;
    };
    const stdout = (out.result ?? out).stdout ?? "";
    assert.equal(stdout, `${"*".repeat(SECRET.length)}\n${SECRET.length}\n`, "masked, same length");
    for (const { path, text } of filesUnder(dir))
      for (const form of FORMS)
        assert.ok(!text.includes(form), `${JSON.stringify(form)} in ${path}`);
  });
});

describe("a takeover by a worker without the secret", () => {
  it("fails the run (ESECRET_NOT_FOUND) instead of going on unable to hide its value", async () => {
    const run = await queueRun(log, { prompt: "p" });
    const epoch = await log.bumpEpoch(run.runId);
    // A call of an earlier drive used the secret.
    await log.append({
      ...run,
      fence: epoch,
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, {
          callId: "c",
          tool: "process.run",
          inputJson: '{"command":"echo $ENV.DEMO_TOKEN"}',
        }),
      },
    });
    const outcome = await driveRun(
      { ...deps(), secretProviders: [createEnvSecretProvider({})] },
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    assert.equal(outcome, "failed");
    const last = (await log.read(run.runId, 0)).at(-1)?.event.payload;
    assert.ok(last?.case === "runFailed");
    assert.equal(last.value.error?.code, "ESECRET_NOT_FOUND");
    assert.match(last.value.error?.message ?? "", /DEMO_TOKEN/);
  });
});
