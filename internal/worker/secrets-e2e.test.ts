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
import {
  ApprovalDecision,
  ApprovalResolvedSchema,
  ToolCallSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { SEALED_SHOWN } from "../kernel/secret-taint.ts";
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
import { WITHHELD_AFTER_SECRET } from "./before-secret.ts";
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
    // The read asks a person now (the run holds a secret in tok.txt): released while held.
    assert.ok(first === "released" || first === "paused", first);
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
    // Redacted, or the file is gone: the first drive pauses when the held read waits for
    // its approval, and the paused run's snapshot leaves out the file it holds a secret in.
    const shown = outputs.filter(
      (o) => o.includes("[REDACTED]") || /No such file|can't open|cannot open/.test(o),
    );
    assert.ok(shown.length >= reads.length, `the reads happened: ${outputs.join("\n")}`);
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
    // A secret-carrying call ran: the patch holds the run's changes up to it (none), and
    // says everything from it on is withheld (before-secret.ts).
    assert.deepEqual(
      completed.value.patchOmitted.map((o) => o.path),
      [WITHHELD_AFTER_SECRET.path],
    );
  });
});

describe("a paused run's snapshot", () => {
  it("is not taken once a secret-carrying call ran: the container stays, the value stays masked", async () => {
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
    // No snapshot (which files it left out would tell which ones the secret call touched):
    // the container stays, and the exec still asks a person (the secret-carrying exec holds
    // the container for the rest of the run).
    assert.equal(await drive(), "paused");
    await approveLast();
    assert.equal(await drive(), "completed");
    const results = (await log.read(run.runId, 0)).flatMap((e) =>
      e.event.payload.case === "toolResult" && e.event.payload.value.callId === "c"
        ? [e.event.payload.value]
        : [],
    );
    const out = JSON.parse(results[0]?.outputJson ?? "{}") as {
      result?: { stdout: string; stderr: string };
      stdout?: string;
      stderr?: string;
    };
    const { stdout = "" } = out.result ?? out;
    assert.equal(
      stdout,
      `[REDACTED]\n${SECRET.length}\n`,
      "the same container: the file is there, masked",
    );
    const all = (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const names = all
      .slice(all.findIndex((p) => p.case === "secretWritten"))
      .flatMap((p) => (p.case === "artifactEmitted" ? [p.value.name] : []));
    assert.deepEqual(names, [], "after the secret call: no snapshot, no patch (none before)");
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

describe("a secret written by an approved call (containment by mechanism)", () => {
  it("no later call reads the file without a person, across a takeover; the patch leaves it out", async () => {
    const ws = await packWorkspace([
      { path: "README", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
    ]);
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(ws);
    const run = await queueRun(log, {
      prompt: "set up the token",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const stop = new AbortController();
    // The person approves the token setup only; every later ask is denied (and recorded).
    const asked: { callId: string; files: string[] }[] = [];
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case !== "approvalRequested") continue;
        if (p.value.callId === "w1") {
          await approveInLog(log, run, p.value.approvalId);
          continue;
        }
        asked.push({ callId: p.value.callId, files: [...(p.value.preview?.secretFiles ?? [])] });
        await log.append({
          runId: run.runId,
          sessionId: run.sessionId,
          payload: {
            case: "approvalResolved",
            value: create(ApprovalResolvedSchema, {
              approvalId: p.value.approvalId,
              decision: ApprovalDecision.DENY,
              resolvedBy: "alice",
            }),
          },
        });
      }
    })();
    script = [
      callReply("w1", "process.run", { command: "printf %s '$ENV.DEMO_TOKEN' > tok.txt" }),
      callReply("r1", "repo.read", { path: "README" }),
    ];
    const release = new AbortController();
    let n = 0;
    onAsk = () => {
      if (++n === 2) release.abort();
    };
    const first = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), release.signal);
    onAsk = undefined;
    assert.ok(first === "released" || first === "paused", first);
    // Drive 2, a fresh kernel (the taint comes from the log): the model re-encodes.
    const reads = [
      "base32 tok.txt",
      "gzip -c tok.txt | base64",
      "od -c tok.txt",
      "fold -w 4 tok.txt",
      "head -c 11 tok.txt",
      "tail -c 12 tok.txt",
      "sed 's/\\(.\\)./\\1/g' tok.txt",
      "awk '{ for (i = 1; i <= length($0); i++) printf \"\\\\u%04x\", 0 }' tok.txt",
      "openssl enc -aes-256-cbc -pbkdf2 -k mykey -in tok.txt | base64 || awk '{print}' tok.txt | tr 'A-Za-z' 'N-ZA-Mn-za-m'",
      "cp tok.txt /tmp/t && base32 /tmp/t",
    ];
    script = [
      callReply("r0", "repo.read", { path: "tok.txt" }),
      ...reads.map((command, i) => callReply(`x${i}`, "process.run", { command })),
      sayReply("done"),
    ];
    const outcome = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), stop.signal);
    stop.abort();
    await approver;
    assert.equal(outcome, "completed");
    assert.deepEqual(
      asked.map((a) => a.callId),
      ["r1", "r0", ...reads.map((_, i) => `x${i}`)],
      "every later call waited for a person",
    );
    // tok.txt was made by the secret call: counted, never named. The run keeps its
    // container across the pause and the takeover, and tok.txt stays held: repo.read of it
    // asks too, and every approval names its root (without its name).
    for (const a of asked) assert.deepEqual(a.files, [...SEALED_SHOWN], a.callId);
    const events = await log.read(run.runId, 0);
    const b32 = base32(SECRET);
    const forms = [
      ...FORMS,
      b32,
      b32.slice(0, 10),
      [...SECRET].join("   "),
      SECRET.slice(0, 11),
      SECRET.slice(-12),
    ];
    const places = [
      ...events.map((e) => ({ path: `event ${e.event.seq} ${e.type}`, text: e.json })),
      ...stub.requests.map((r, i) => ({
        path: `model request ${i}`,
        text: JSON.stringify(r.body),
      })),
      ...filesUnder(join(dir, "artifacts")),
    ];
    for (const { path, text } of places)
      for (const form of forms)
        assert.ok(!text.includes(form), `${JSON.stringify(form)} in ${path}`);
    const completed = events.at(-1)?.event.payload;
    assert.ok(completed?.case === "runCompleted");
    // The patch holds the run's changes up to the secret call (none); the rest is withheld.
    assert.deepEqual(
      completed.value.patchOmitted.map((o) => o.path),
      [WITHHELD_AFTER_SECRET.path],
    );
    assert.equal(completed.value.patchDigest, "");
  });
});

/** RFC 4648 base32, as `base32` prints it. */
function base32(s: string): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const b of Buffer.from(s)) bits += b.toString(2).padStart(8, "0");
  let out = "";
  for (let i = 0; i < bits.length; i += 5)
    out += alphabet[Number.parseInt(bits.slice(i, i + 5).padEnd(5, "0"), 2)];
  return out.padEnd(Math.ceil(out.length / 8) * 8, "=");
}
