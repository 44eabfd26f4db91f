/**
 * A run's container lost mid-run, against real parts: the embedded event log, real
 * containers (docker kill, docker stop, the agent killed from the host), the kernel, and the
 * AI SDK engine on a scripted OpenAI-compatible server. The run writes through repo.patch and
 * process.run, then its container is lost; the drive that finds it lost releases the run, and
 * the next drive recovers the workspace. Everything is asserted by effect: the final patch's
 * content, what the model was sent, the run's end.
 *
 * The model, per run: 1 repo.patch hello.txt (helo → hello); 2 process.run writes made.txt;
 * 3 repo.patch made.txt (made → made twice: it only applies on top of 2); then the container
 * is lost and 4 (cat) fails in it. Told that 2 and 3 are gone, it redoes them in one command
 * and finishes.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type Docker from "dockerode";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import {
  type Event,
  RunCancelRequestedSchema,
  SandboxLostSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { containerName } from "../sandbox/docker-sandbox.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { MARK_DIR } from "../sandbox/root-marks.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import {
  type OpenAiStub,
  type StubReply,
  type StubRequest,
  startOpenAiStub,
} from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { PATCH } from "./run-artifacts.ts";
import { type DriveOutcome, driveRun } from "./run-driver.ts";

type Loss =
  | "kill"
  | "stop"
  | "agent"
  | "end"
  | "rend"
  | "takeover"
  | "rtakeover"
  | "rcancel"
  | "fourth"
  | "held"
  | "heldstop"
  | "heldsetup"
  | "halfway";

let dir: string;
let log: FileEventLog;
let artifacts: FsArtifactStore;
let docker: Docker;
let sandbox: Sandbox;
let label: string;
let cleanupBoxes: () => Promise<void>;
let stub: OpenAiStub;
let policy: Policy;
/** How each run's container is lost, by the run's prompt key; set once it was. */
const losses = new Map<
  string,
  { how: Loss; runId: string; done: boolean; stop?: AbortController }
>();

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-lost-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const t = await testSandbox();
  docker = t.docker;
  sandbox = t.sandbox;
  label = t.label;
  cleanupBoxes = t.cleanup;
  stub = await startOpenAiStub(model);
  policy = testImagePolicy();
});
after(async () => {
  await cleanupBoxes?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The scripted model: its state is the conversation it is sent. */
async function model(req: StubRequest): Promise<StubReply> {
  const messages = (req.body?.messages ?? []) as { role: string; content?: unknown }[];
  const text = (m: { content?: unknown }) =>
    typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "");
  const key = /lost-[a-z]+-[0-9a-z]+/.exec(JSON.stringify(messages))?.[0] ?? "";
  const n = messages.filter((m) => m.role === "tool").length;
  const told = messages.some(
    (m) => m.role === "user" && text(m).includes("sandbox container was lost"),
  );
  if (told) {
    const redone = JSON.stringify(messages).includes("call_5");
    return redone
      ? sayReply("redone and done")
      : callReply("call_5", "process.run", { command: "printf 'made twice\\n' > made.txt" });
  }
  if (key.startsWith("lost-held") && n === 2)
    // rm is high risk: this call waits for a person.
    return callReply("call_3", "process.run", {
      command: "rm -f hello.txt.orig && echo approved > approved.txt",
    });
  if (key.startsWith("lost-held") && n >= 3) return sayReply("finished");
  switch (n) {
    case 0:
      return callReply("call_1", "repo.patch", {
        path: "hello.txt",
        edits: [{ oldText: "helo", newText: "hello" }],
      });
    case 1:
      return callReply("call_2", "process.run", { command: "echo made > made.txt" });
    case 2:
      return callReply("call_3", "repo.patch", {
        path: "made.txt",
        edits: [{ oldText: "made", newText: "made twice" }],
      });
    case 3: {
      const loss = losses.get(key);
      if (["takeover", "rtakeover", "rcancel", "fourth", "halfway"].includes(loss?.how ?? "")) {
        // The worker stops (released at the next step boundary); the container is lost
        // while no drive holds the run, and the next owner finds it gone.
        loss?.stop?.abort();
      } else if (loss !== undefined && !loss.done) {
        await loseContainer(loss.how, loss.runId);
        loss.done = true;
      }
      // "end": the model answers at once, so the drive's next move is to complete.
      if (key.startsWith("lost-end-") || key.startsWith("lost-rend-")) return sayReply("all done");
      return callReply("call_4", "process.run", { command: "cat hello.txt" });
    }
    default:
      return sayReply("finished");
  }
}

/** Loses the run's container the way `how` says, and waits until the engine shows it stopped. */
async function loseContainer(how: Loss, runId: string): Promise<void> {
  const c = docker.getContainer(containerName(label, runId));
  if (how === "rend") {
    // Stopped and started again by the engine: running, its tmpfs workspace empty.
    const before = (await c.inspect()).State.StartedAt;
    await c.restart({ t: 2 });
    const again = await c.inspect();
    assert.ok(again.State.Running && again.State.StartedAt !== before, "restarted");
    return;
  }
  if (how === "kill" || how === "end") await c.kill();
  else if (how === "stop") await c.stop({ t: 2 });
  else {
    // The agent (the child of the container's init) killed from the host by its host pid.
    const top = (await c.top({ ps_args: "-o pid,ppid,args" })) as {
      Titles: string[];
      Processes: string[][];
    };
    const col = (name: string) => top.Titles.indexOf(name);
    const rows = top.Processes.map((p) => ({
      pid: Number(p[col("PID")]),
      ppid: Number(p[col("PPID")]),
      args: p[col("COMMAND")] ?? p[col("CMD")] ?? "",
    }));
    const init = rows.find((r) => r.args.includes("docker-init"));
    const agent = rows.find((r) => r.ppid === init?.pid);
    assert.ok(agent !== undefined, `no agent under the init in ${JSON.stringify(rows)}`);
    process.kill(agent.pid, "SIGKILL");
  }
  for (let i = 0; i < 600; i++) {
    const running = await c
      .inspect()
      .then((x) => x.State.Running)
      .catch(() => false);
    if (!running) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`the container of run ${runId} was still running 60 s after docker ${how}`);
}

/**
 * The run's container as a drive that died mid-recovery leaves it: the root mark
 * (sandbox/root-marks.ts) and a workspace that lacks a recorded patch (hello.txt back as
 * uploaded).
 */
async function leftMidRecovery(runId: string): Promise<void> {
  const name = containerName(label, runId);
  execFileSync("docker", ["exec", "-u", "0:0", name, "touch", `${MARK_DIR}/recovering`]);
  execFileSync("docker", [
    "exec",
    "-u",
    "1000:1000",
    name,
    "sh",
    "-c",
    "printf 'helo\\n' > /workspace/hello.txt",
  ]);
}

async function newRun(how: Loss): Promise<{ runId: string; key: string }> {
  const tar = await packWorkspace([
    { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("helo\n") },
  ]);
  const info = await artifacts.put(tar);
  const key = `lost-${how}-${Math.random().toString(36).slice(2, 10)}`;
  const { runId } = await queueRun(log, {
    prompt: `Fix hello.txt (${key})`,
    workspaceDigest: info.digest,
    workspaceSizeBytes: info.size,
  });
  losses.set(key, { how, runId, done: false });
  return { runId, key };
}

/** Drives the run as workers would: each released drive is followed by the next claim's. */
async function driveToEnd(
  runId: string,
  onLost: "fail" | "continue",
  boxes: Sandbox = sandbox,
): Promise<DriveOutcome[]> {
  const p: Policy = { ...policy, sandbox: { ...policy.sandbox, onLost } };
  const outcomes: DriveOutcome[] = [];
  const loss = [...losses.values()].find((l) => l.runId === runId);
  for (let i = 0; i < 5; i++) {
    const epoch = await log.bumpEpoch(runId);
    const stop = new AbortController();
    if (loss !== undefined) loss.stop = stop;
    const o = await driveRun(
      stubDriverDeps({ log, policy: p, sandbox: boxes, artifacts, baseURL: stub.baseURL }),
      runId,
      epoch,
      stop.signal,
    );
    outcomes.push(o);
    if (o !== "released") return outcomes;
    if (loss?.how === "fourth" && !loss.done) {
      // Three losses recorded before (as three earlier recoveries left them), then a fourth.
      const sessionId = (await events(runId))[0]?.sessionId ?? "";
      for (let n = 0; n < 3; n++)
        await log.append({
          runId,
          sessionId,
          payload: {
            case: "sandboxLost",
            value: create(SandboxLostSchema, { reason: `earlier loss ${n + 1}` }),
          },
        });
    }
    if (
      (loss?.how === "takeover" || loss?.how === "rcancel" || loss?.how === "fourth") &&
      !loss.done
    ) {
      await loseContainer("kill", runId);
      loss.done = true;
    }
    if (loss?.how === "rtakeover" && !loss.done) {
      await loseContainer("rend", runId);
      loss.done = true;
    }
    if (loss?.how === "halfway" && !loss.done) {
      await leftMidRecovery(runId);
      loss.done = true;
    }
  }
  assert.fail(`run ${runId} was still not ended after 5 drives: ${outcomes.join(", ")}`);
}

const events = async (runId: string): Promise<Event[]> =>
  (await log.read(runId, 0)).map((e) => e.event);
const payloadsOf = <C extends NonNullable<Event["payload"]["case"]>>(evs: Event[], c: C) =>
  evs.flatMap((e) =>
    e.payload.case === c
      ? [e.payload.value as Extract<Event["payload"], { case: C }>["value"]]
      : [],
  );

async function finalPatch(evs: Event[]): Promise<string> {
  const art = payloadsOf(evs, "artifactEmitted").find((a) => a.name === PATCH);
  assert.ok(art !== undefined, "the completed run has a patch artifact");
  const parts: Uint8Array[] = [];
  for await (const c of artifacts.read(art.digest)) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
}

/** The requests the model got after its container was lost, for this run. */
function toldRequests(key: string): string[] {
  return stub.requests
    .map((r) => JSON.stringify(r.body?.messages ?? []))
    .filter((m) => m.includes(key) && m.includes("sandbox container was lost"));
}

describe("a run whose container is lost goes on from a recovered workspace (sandbox.onLost: continue)", () => {
  for (const how of ["kill", "stop", "agent"] as const) {
    it(`docker ${how === "agent" ? "top + kill of the agent" : how}: repo.patch re-applied, process.run listed lost, the model told and its redo in the patch`, async () => {
      const { runId, key } = await newRun(how);
      const outcomes = await driveToEnd(runId, "continue");
      assert.deepEqual(
        outcomes,
        ["released", "completed"],
        "the drive that found the container lost released the run; the next completed it",
      );
      assert.ok(losses.get(key)?.done, "the container was lost during the run");
      const evs = await events(runId);
      assert.equal(verifyChain((await log.read(runId, 0)).map((e) => e.json)).ok, true);
      const lost = payloadsOf(evs, "sandboxLost");
      assert.equal(lost.length, 1, "one sandbox.lost");
      assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
      // call_2 wrote made.txt (a command: not reproducible); call_3 patched made.txt, which
      // the restored workspace does not have: it no longer applies.
      assert.deepEqual(lost[0]?.lostCallIds, ["call_2", "call_3"]);
      assert.equal(lost[0]?.restoredFromSeq, 0n);
      assert.equal(lost[0]?.failsRun, false);
      // The call the loss hit is recorded failed, not applied.
      const r4 = payloadsOf(evs, "toolResult").find((r) => r.callId === "call_4");
      assert.equal(r4?.ok, false);
      // The model was told, naming the lost calls.
      const told = toldRequests(key);
      assert.ok(told.length > 0, "a model request after the loss carries the notice");
      assert.match(told[0] ?? "", /call_2[^"]*process\.run/);
      assert.match(told[0] ?? "", /call_3[^"]*repo\.patch/);
      // By effect: the re-applied patch and the model's redo are in the final patch.
      const patch = await finalPatch(evs);
      assert.match(patch, /^\+hello$/m, "call_1's change (re-applied) is in the patch");
      assert.match(patch, /made\.txt/);
      assert.match(patch, /^\+made twice$/m, "the redo of the lost calls is in the patch");
      assertPatchHoldsApplied(evs, patch);
      const boxes = await docker.listContainers({
        all: true,
        filters: { label: [`agentd.run-id=${runId}`] },
      });
      assert.deepEqual(boxes, [], "no container of the run is left");
    });
  }
});

describe("a container lost while the model finishes", () => {
  for (const how of ["end", "rend"] as const)
    it(`${how === "end" ? "docker kill" : "docker restart (running again, its workspace empty)"}: the run does not complete from a replacement: the next drive recovers, tells the model, and only then completes`, async () => {
      const { runId, key } = await newRun(how);
      const outcomes = await driveToEnd(runId, "continue");
      assert.deepEqual(outcomes, ["released", "completed"]);
      const evs = await events(runId);
      const lost = payloadsOf(evs, "sandboxLost");
      assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
      assert.deepEqual(lost[0]?.lostCallIds, ["call_2", "call_3"]);
      assert.ok(toldRequests(key).length > 0, "the model was asked again, told of the loss");
      const seqOf = (c: string) => evs.findIndex((e) => e.payload.case === c);
      assert.ok(seqOf("sandboxLost") < seqOf("runCompleted"));
      const patch = await finalPatch(evs);
      assert.match(patch, /^\+hello$/m);
      assert.match(patch, /^\+made twice$/m);
      assertPatchHoldsApplied(evs, patch);
    });
});

describe("a taker finds the container gone", () => {
  for (const how of ["takeover", "rtakeover"] as const)
    it(`the run released by a stopping worker, its container ${how === "takeover" ? "killed" : "restarted (running, its workspace empty)"} before the next drive: recovered at the start, the read-only call not lost`, async () => {
      const { runId, key } = await newRun(how);
      const outcomes = await driveToEnd(runId, "continue");
      assert.deepEqual(outcomes, ["released", "completed"]);
      const evs = await events(runId);
      const r4 = payloadsOf(evs, "toolResult").find((r) => r.callId === "call_4");
      assert.equal(r4?.ok, true, "call_4 (cat) ran before the worker let go");
      const lost = payloadsOf(evs, "sandboxLost");
      assert.equal(lost.length, 1);
      assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
      // call_4 only read: nothing of it is lost.
      assert.deepEqual(lost[0]?.lostCallIds, ["call_2", "call_3"]);
      assert.ok(toldRequests(key).length > 0, "the model was told");
      const patch = await finalPatch(evs);
      assert.match(patch, /^\+hello$/m);
      assert.match(patch, /^\+made twice$/m);
      assertPatchHoldsApplied(evs, patch);
    });
});

describe("a container lost while the run waits for a person", () => {
  it("the approved call runs once, in the recovered workspace, after sandbox.lost", async () => {
    const { runId, key } = await newRun("held");
    const loss = losses.get(key);
    const p: Policy = { ...policy, sandbox: { ...policy.sandbox, onLost: "continue" } };
    const deps = stubDriverDeps(
      { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
      { approvalHoldMs: 120_000 },
    );
    const first = driveRun(deps, runId, await log.bumpEpoch(runId), new AbortController().signal);
    let approvalId = "";
    for (let i = 0; i < 1200 && approvalId === ""; i++) {
      approvalId = payloadsOf(await events(runId), "approvalRequested")[0]?.approvalId ?? "";
      if (approvalId === "") await new Promise((r) => setTimeout(r, 100));
    }
    assert.notEqual(approvalId, "", "call_3 asked for an approval within 120 s");
    await loseContainer("kill", runId);
    if (loss !== undefined) loss.done = true;
    const evs0 = await events(runId);
    await approveInLog(log, { runId, sessionId: evs0[0]?.sessionId ?? "" }, approvalId);
    assert.equal(await first, "released", "the held drive found its container lost and let go");
    assert.deepEqual(await driveToEnd(runId, "continue"), ["completed"]);
    const evs = await events(runId);
    const lost = payloadsOf(evs, "sandboxLost");
    assert.equal(lost.length, 1);
    assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
    assert.deepEqual(lost[0]?.lostCallIds, ["call_2"]);
    const r3 = payloadsOf(evs, "toolResult").filter((r) => r.callId === "call_3");
    assert.equal(r3.length, 1, "the approved call has one result");
    assert.equal(r3[0]?.ok, true);
    const at = (pred: (e: Event) => boolean) => evs.findIndex(pred);
    assert.ok(
      at((e) => e.payload.case === "sandboxLost") <
        at((e) => e.payload.case === "toolResult" && e.payload.value.callId === "call_3"),
      "the approved call ran after the recovery",
    );
    const patch = await finalPatch(evs);
    assert.match(patch, /^\+hello$/m, "call_1 re-applied before the approved call ran");
    assert.match(patch, /^\+approved$/m, "the approved call's effect is in the patch");
    assertPatchHoldsApplied(evs, patch);
  });
});

describe("a container lost while held, then the worker stops", () => {
  it("the run is not paused from a lost container (no empty snapshot); the next drive recovers it and holds", async () => {
    const { runId, key } = await newRun("heldstop");
    const loss = losses.get(key);
    const p: Policy = { ...policy, sandbox: { ...policy.sandbox, onLost: "continue" } };
    const deps = stubDriverDeps(
      { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
      { approvalHoldMs: 120_000 },
    );
    const stop = new AbortController();
    const first = driveRun(deps, runId, await log.bumpEpoch(runId), stop.signal);
    let approvalId = "";
    for (let i = 0; i < 1200 && approvalId === ""; i++) {
      approvalId = payloadsOf(await events(runId), "approvalRequested")[0]?.approvalId ?? "";
      if (approvalId === "") await new Promise((r) => setTimeout(r, 100));
    }
    assert.notEqual(approvalId, "", "call_3 asked for an approval within 120 s");
    await loseContainer("kill", runId);
    if (loss !== undefined) loss.done = true;
    stop.abort(); // the worker stops: a held run would pause (snapshot) now
    assert.equal(await first, "released");
    const snapshots = payloadsOf(await events(runId), "artifactEmitted").filter(
      (a) => a.name === "workspace-snapshot",
    );
    assert.deepEqual(snapshots, [], "no snapshot taken of a lost container");
    const evs0 = await events(runId);
    await approveInLog(log, { runId, sessionId: evs0[0]?.sessionId ?? "" }, approvalId);
    assert.deepEqual(await driveToEnd(runId, "continue"), ["completed"]);
    const evs = await events(runId);
    assert.deepEqual(payloadsOf(evs, "sandboxLost")[0]?.lostCallIds, ["call_2"]);
    const patch = await finalPatch(evs);
    assert.match(patch, /^\+hello$/m);
    assert.match(patch, /^\+approved$/m);
    assertPatchHoldsApplied(evs, patch);
  });
});

describe("a container lost while held, taken over while the approval still waits", () => {
  it("the taker recovers, holds, and once approved runs the setup again before the approved call", async () => {
    const { runId, key } = await newRun("heldsetup");
    const loss = losses.get(key);
    const p: Policy = {
      ...policy,
      sandbox: { ...policy.sandbox, onLost: "continue" },
      tools: { ...policy.tools, setup: "echo deps > /tmp/deps.txt" },
    };
    const deps = stubDriverDeps(
      { log, policy: p, sandbox, artifacts, baseURL: stub.baseURL },
      { approvalHoldMs: 120_000 },
    );
    const stop = new AbortController();
    const first = driveRun(deps, runId, await log.bumpEpoch(runId), stop.signal);
    const waitFor = async (what: string, has: (evs: Event[]) => boolean) => {
      for (let i = 0; i < 1200; i++) {
        if (has(await events(runId))) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.fail(`${what} within 120 s`);
    };
    await waitFor("call_3 asked for an approval", (evs) =>
      evs.some((e) => e.payload.case === "approvalRequested"),
    );
    await loseContainer("kill", runId);
    if (loss !== undefined) loss.done = true;
    stop.abort();
    assert.equal(await first, "released");
    // The taker begins while the approval still waits: it recovers and holds the run.
    const second = driveRun(deps, runId, await log.bumpEpoch(runId), new AbortController().signal);
    await waitFor("the taker recovered the workspace", (evs) =>
      evs.some((e) => e.payload.case === "sandboxLost"),
    );
    const evs0 = await events(runId);
    const approvalId = payloadsOf(evs0, "approvalRequested")[0]?.approvalId ?? "";
    await approveInLog(log, { runId, sessionId: evs0[0]?.sessionId ?? "" }, approvalId);
    assert.equal(await second, "completed");
    const evs = await events(runId);
    const at = (pred: (e: Event) => boolean) => evs.findIndex(pred);
    const setups = evs.flatMap((e, i) =>
      e.payload.case === "toolResult" &&
      payloadsOf(evs, "toolCall").some(
        (c) =>
          c.callId === (e.payload.value as { callId: string }).callId && c.tool === "setup.run",
      )
        ? [i]
        : [],
    );
    assert.equal(setups.length, 2, "the setup ran at the start and again in the new container");
    const call3 = at((e) => e.payload.case === "toolResult" && e.payload.value.callId === "call_3");
    assert.ok(at((e) => e.payload.case === "sandboxLost") < (setups[1] ?? -1));
    assert.ok(
      (setups[1] ?? Number.MAX_SAFE_INTEGER) < call3,
      "the setup ran before the approved call",
    );
    const patch = await finalPatch(evs);
    assert.match(patch, /^\+approved$/m);
  });
});

describe("a container left mid-recovery", () => {
  it("is not taken for a recovered one: the next drive replaces it and recovers anew", async () => {
    const { runId } = await newRun("halfway");
    const outcomes = await driveToEnd(runId, "continue");
    assert.deepEqual(outcomes, ["released", "completed"]);
    const evs = await events(runId);
    const lost = payloadsOf(evs, "sandboxLost");
    assert.equal(lost.length, 1);
    assert.deepEqual(lost[0]?.reappliedCallIds, ["call_1"]);
    const patch = await finalPatch(evs);
    assert.match(patch, /^\+hello$/m, "call_1's change is back, not the half-recovered file");
    assertPatchHoldsApplied(evs, patch);
  });
});

/**
 * The sandbox as it is, except that in a container being recovered (the marker made) the
 * first call that carries the drive's cancel signal first has a person cancel the run and
 * waits until the drive's cancel watch has seen it: a cancel that lands mid-recovery.
 */
function cancelMidRecovery(inner: Sandbox, runId: string): Sandbox {
  const wrap = (h: SandboxHandle): SandboxHandle => {
    let marked = false;
    return new Proxy(h, {
      get(t, k) {
        if (k === "mark")
          return async (name: "filled" | "recovering", op: "set" | "clear" | "test") => {
            const r = await t.mark?.(name, op);
            if (name === "recovering" && op === "set") marked = true;
            return r;
          };
        if (k === "exec")
          return async (req: ExecRequest) => {
            if (marked && req.signal !== undefined && !req.signal.aborted) {
              marked = false;
              const sessionId = (await events(runId))[0]?.sessionId ?? "";
              await log.append({
                runId,
                sessionId,
                payload: {
                  case: "runCancelRequested",
                  value: create(RunCancelRequestedSchema, {
                    reason: "enough",
                    requestedBy: "alice",
                  }),
                },
              });
              const signal = req.signal;
              await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
            }
            return t.exec(req);
          };
        const v = Reflect.get(t, k, t);
        return typeof v === "function" ? v.bind(t) : v;
      },
    });
  };
  return { ...inner, create: async (spec) => wrap(await inner.create(spec)) };
}

describe("a cancel that lands while a lost container is recovered", () => {
  it("cancels the run: no sandbox.lost listing the patches the cancel cut short, no ESANDBOX_LOST", async () => {
    const { runId } = await newRun("rcancel");
    const outcomes = await driveToEnd(runId, "fail", cancelMidRecovery(sandbox, runId));
    assert.deepEqual(outcomes, ["released", "cancelled"]);
    const evs = await events(runId);
    assert.deepEqual(payloadsOf(evs, "sandboxLost"), [], "nothing recorded lost");
    assert.deepEqual(payloadsOf(evs, "runFailed"), []);
    assert.equal(payloadsOf(evs, "runCancelled")[0]?.cancelledBy, "alice");
    assert.equal(verifyChain((await log.read(runId, 0)).map((e) => e.json)).ok, true);
    const boxes = await docker.listContainers({
      all: true,
      filters: { label: [`agentd.run-id=${runId}`] },
    });
    assert.deepEqual(boxes, [], "no container of the run is left");
  });
});

describe("a run whose container keeps being lost", () => {
  it("its fourth loss fails it (ESANDBOX_LOST) even with sandbox.onLost: continue", async () => {
    const { runId } = await newRun("fourth");
    const outcomes = await driveToEnd(runId, "continue");
    assert.deepEqual(outcomes, ["released", "failed"]);
    const evs = await events(runId);
    const lost = payloadsOf(evs, "sandboxLost");
    assert.equal(lost.length, 4);
    assert.equal(lost[3]?.failsRun, true);
    const failed = payloadsOf(evs, "runFailed");
    assert.equal(failed[0]?.error?.code, "ESANDBOX_LOST");
    assert.match(failed[0]?.error?.message ?? "", /lost 4 times/);
  });
});

describe("sandbox.onLost: fail", () => {
  it("docker kill: the run FAILED with ESANDBOX_LOST naming the lost calls; nothing completed", async () => {
    const { runId, key } = await newRun("kill");
    const outcomes = await driveToEnd(runId, "fail");
    assert.deepEqual(outcomes, ["released", "failed"]);
    const evs = await events(runId);
    const lost = payloadsOf(evs, "sandboxLost");
    assert.equal(lost.length, 1);
    assert.equal(lost[0]?.failsRun, true);
    assert.deepEqual(lost[0]?.lostCallIds, ["call_2", "call_3"]);
    const failed = payloadsOf(evs, "runFailed");
    assert.equal(failed[0]?.error?.code, "ESANDBOX_LOST");
    assert.match(failed[0]?.error?.message ?? "", /call_2 \(process\.run/);
    assert.match(failed[0]?.error?.message ?? "", /call_3 \(repo\.patch/);
    assert.match(failed[0]?.error?.message ?? "", /sandbox\.onLost/);
    assert.equal(payloadsOf(evs, "runCompleted").length, 0);
    assert.equal(toldRequests(key).length, 0, "the model was not asked again");
  });
});

/**
 * The invariant: every repo.patch the log records ok and no sandbox.lost lists has its
 * added lines in the completed run's patch (unless a later call of the log changed the
 * same file: not the case in these scripts, which is checked too).
 */
function assertPatchHoldsApplied(evs: Event[], patch: string): void {
  const gone = new Set(payloadsOf(evs, "sandboxLost").flatMap((l) => l.lostCallIds));
  const calls = new Map(payloadsOf(evs, "toolCall").map((c) => [c.callId, c]));
  for (const r of payloadsOf(evs, "toolResult")) {
    const c = calls.get(r.callId);
    if (!r.ok || c?.tool !== "repo.patch" || gone.has(r.callId)) continue;
    const input = JSON.parse(c.inputJson) as { path: string; edits: { newText: string }[] };
    for (const e of input.edits)
      assert.ok(
        patch.includes(`+${e.newText}`),
        `${r.callId} (${input.path}) is recorded applied: its change must be in the patch`,
      );
  }
}
