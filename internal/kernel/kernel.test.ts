/**
 * The kernel end to end against real components: a private Redis behind a real `agentd
 * server` process (approvals over gRPC with grpc-js), a real container for previews and
 * execution, and the OpenTelemetry SDK's in-memory exporter for the spans.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create, toJson } from "@bufbuild/protobuf";
import { trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { AgentdError, isAgentdError } from "../errors.ts";
import { MAX_EVENT_BYTES } from "../eventlog/append-batcher.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import {
  ApprovalDecision,
  EventSchema,
  RunStartedSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { ApprovalState, RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { countingExecs, sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { assertGrpcError, grpc } from "../testing/grpc-run-client.ts";
import { createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { createEnvSecretProvider } from "./secrets.ts";

const SECRET = "s3cr3t-Value-0f-the-demo-token";
const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
);

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy: Policy = {
  ...parsed.policy,
  secrets: { allow: ["DEMO_TOKEN", "MISSING_TOKEN"], providers: [{ type: "env" }] },
  approvals: { expireAfter: 60 * 60_000 },
};

let stack: Stack;
let box: SandboxHandle;
let cleanupBoxes: () => Promise<void>;
let kernel: Kernel;
let run: KernelRun;

const resolve = (
  approvalId: string,
  decision: ApprovalDecision,
  token: string = TOKENS.acme,
  reason = "",
) => stack.client.unary(RunService.method.resolveApproval, { approvalId, decision, reason }, token);
const listApprovals = (token: string = TOKENS.acme, runId = "") =>
  stack.client.unary(RunService.method.listApprovals, { runId }, token);
const eventsJson = async () => (await stack.log.read(run.runId, 0)).map((e) => e.json);

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  cleanupBoxes = t.cleanup;
  const created = await stack.client.createRun({
    prompt: "kernel test",
    labels: { repo: "acme-app" },
  });
  const runId = created.run?.runId as string;
  const sessionId = created.run?.sessionId as string;
  box = await t.sandbox.create({
    runId,
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
      { path: ".env", type: "file", mode: 0o644, data: Buffer.from("A=1\n") },
      { path: "src/a.txt", type: "file", mode: 0o644, data: Buffer.from("one\ntwo\n") },
    ]),
  });
  const fence = await stack.log.bumpEpoch(runId);
  await stack.log.append({
    runId,
    sessionId,
    fence,
    payload: {
      case: "runStarted",
      value: create(RunStartedSchema, { workerId: "test", epoch: BigInt(fence) }),
    },
  });
  run = { runId, sessionId, fence, sandbox: box };
  kernel = createKernel({
    log: stack.log,
    policy: () => policy,
    secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
  });
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
});

describe("kernel pipeline", () => {
  it("auto: a read runs at once; tool.call, policy.decision, tool.started and tool.result are in the log", async () => {
    const out = await kernel.handle(run, {
      callId: "c1",
      tool: "repo.read",
      input: { path: "hello.txt" },
    });
    assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out));
    assert.equal(out.kind === "result" && (out.output as { content: string }).content, "hello\n");
    const types = (await stack.log.read(run.runId, 2)).map((e) => e.type);
    assert.deepEqual(types, ["tool.call", "policy.decision", "tool.started", "tool.result"]);
    const decision = (await stack.log.read(run.runId, 3, 1))[0]?.event.payload;
    assert.equal(
      decision?.case === "policyDecision" && decision.value.rule,
      "capabilities.repo.read.approval=never",
    );
  });

  it("preview+auto: a small patch is previewed from a dry run, then applied; the model gets the preview", async () => {
    const out = await kernel.handle(run, {
      callId: "c2",
      tool: "repo.patch",
      input: { path: "src/a.txt", edits: [{ oldText: "two", newText: "TWO" }] },
    });
    assert.equal(out.kind, "result");
    const o = out.kind === "result" ? (out.output as { preview?: unknown }) : {};
    assert.equal(
      o.preview,
      undefined,
      "the returned output is the tool's; the preview rides in the event",
    );
    const last = (await stack.log.read(run.runId, 0)).at(-1)?.event.payload;
    assert.equal(last?.case, "toolResult");
    const stored = JSON.parse(last?.case === "toolResult" ? last.value.outputJson : "{}");
    assert.equal(stored.preview.hunks, 1);
    assert.equal(stored.preview.linesAdded, 1);
    assert.deepEqual(stored.preview.files, ["src/a.txt"]);
    const r = await box.exec({ argv: ["cat", "src/a.txt"], timeoutMs: 5000, maxOutputBytes: 1000 });
    assert.equal(r.stdout, "one\nTWO\n");
  });

  it("deny: the model gets the reason as the tool result, nothing runs", async () => {
    const out = await kernel.handle(run, {
      callId: "c3",
      tool: "process.run",
      input: { command: "sudo touch /workspace/pwned" },
    });
    assert.deepEqual(out.kind === "result" && out.error?.code, "EPOLICY");
    assert.match(out.kind === "result" ? (out.error?.message ?? "") : "", /sudo/);
    const r = await box.exec({ argv: ["ls", "/workspace"], timeoutMs: 5000, maxOutputBytes: 1000 });
    assert.equal(r.stdout.includes("pwned"), false);
  });

  it("test.run: the parsed results ride in ToolResult.tests, redacted like the output; exit 127 is ENOTFOUND", async () => {
    const tap =
      "printf 'TAP version 13\\nok 1 - adds\\nnot ok 2 - leaks GITHUB_TOKEN=abc123def\\n1..2\\n'; exit 1";
    const withTests: KernelRun = {
      ...run,
      commands: { test: { command: tap, source: ".agent/config.yaml commands.test" } },
    };
    const out = await kernel.handle(withTests, { callId: "t1", tool: "test.run", input: {} });
    assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out));
    const last = (await stack.log.read(run.runId, 0)).at(-1)?.event.payload;
    assert.ok(last?.case === "toolResult");
    const t = last.value.tests;
    assert.deepEqual([t?.format, t?.passed, t?.failed, last.value.exitCode], ["tap", 1, 1, 1]);
    assert.equal(t?.failures[0]?.name, "leaks GITHUB_TOKEN=[REDACTED]");
    const doc = JSON.parse(last.value.outputJson);
    assert.equal((doc.result ?? doc).tests.failed, 1, "output_json carries it too");
    const missing: KernelRun = {
      ...run,
      commands: { test: { command: "cargo test", source: "Cargo.toml" } },
    };
    const nf = await kernel.handle(missing, { callId: "t2", tool: "test.run", input: {} });
    assert.equal(nf.kind === "result" && nf.error?.code, "ENOTFOUND", JSON.stringify(nf));
    assert.match(
      nf.kind === "result" ? (nf.error?.message ?? "") : "",
      /^cargo: command not found.*agentd-sandbox-rust:latest/,
    );
    const end = (await stack.log.read(run.runId, 0)).at(-1)?.event.payload;
    assert.ok(end?.case === "toolResult" && !end.value.ok && end.value.tests === undefined);
  });

  it("invalid input is refused with EVALIDATION and the field named, before anything runs", async () => {
    const out = await kernel.handle(run, { callId: "c3b", tool: "repo.read", input: { path: 7 } });
    assert.equal(out.kind === "result" && out.error?.code, "EVALIDATION");
    assert.match(out.kind === "result" ? (out.error?.message ?? "") : "", /repo\.read: path: /);
  });

  it("nothing of a call runs until the log acknowledged its tool.started", async () => {
    // The log refuses tool.started (as a Redis that is down would): the process never starts.
    const refusing = new Proxy(stack.log, {
      get(log, key) {
        if (key === "append")
          return (req: Parameters<typeof log.append>[0]) =>
            req.payload.case === "toolStarted"
              ? Promise.reject(new AgentdError("EUNAVAILABLE", "the log is down"))
              : log.append(req);
        const v = Reflect.get(log, key);
        return typeof v === "function" ? v.bind(log) : v;
      },
    });
    const k = createKernel({ log: refusing, policy: () => policy, secretProviders: [] });
    await assert.rejects(
      k.handle(run, {
        callId: "c3c",
        tool: "process.run",
        input: { command: "echo ran > started.txt" },
      }),
      (e) => isAgentdError(e, "EUNAVAILABLE"),
    );
    const r = await box.exec({
      argv: ["sh", "-c", "test -e started.txt && echo ran || echo absent"],
      timeoutMs: 5000,
      maxOutputBytes: 100,
    });
    assert.equal(r.stdout, "absent\n", "the command never ran");
    // No start on record. The call is left open (a taker answers it) or, when the log took
    // the kernel's own answer, answered failed: either way nobody runs it again.
    const ofCall = (await stack.log.read(run.runId, 0))
      .map((e) => e.event.payload)
      .filter((p) => (p.value as { callId?: string } | undefined)?.callId === "c3c");
    assert.equal(
      ofCall.some((p) => p.case === "toolStarted"),
      false,
      JSON.stringify(ofCall.map((p) => p.case)),
    );
    const answered = ofCall.find((p) => p.case === "toolResult");
    assert.equal(answered === undefined || answered.value.ok === false, true, "never ok");
    // The log answers an open call as a taker would (no later test sees it open).
    if (answered === undefined)
      await stack.log.append({
        runId: run.runId,
        sessionId: run.sessionId,
        fence: run.fence,
        payload: {
          case: "toolResult",
          value: create(ToolResultSchema, {
            callId: "c3c",
            ok: false,
            error: { code: "interrupted", message: "it did not run" },
          }),
        },
      });
    // The same call through the log as it is: started, then run, then its result.
    const ok = await kernel.handle(run, {
      callId: "c3d",
      tool: "process.run",
      input: { command: "echo ran > started.txt" },
    });
    assert.equal(ok.kind === "result" && ok.ok, true, JSON.stringify(ok));
    const evs = (await stack.log.read(run.runId, 0)).slice(-4).map((e) => e.event);
    // No person asked: the start is in the call's first commit, before anything runs.
    assert.deepEqual(
      evs.map((e) => e.type),
      ["tool.call", "policy.decision", "tool.started", "tool.result"],
    );
    const st = evs[2]?.payload;
    assert.ok(st?.case === "toolStarted" && st.value.callId === "c3d");
    await box.exec({ argv: ["rm", "-f", "started.txt"], timeoutMs: 5000, maxOutputBytes: 100 });
  });
});

describe("approvals over the API", () => {
  let approvalId = "";

  it("preview+approval: approval.requested carries the preview, the run pauses, the file is untouched", async () => {
    const out = await kernel.handle(run, {
      callId: "c4",
      tool: "repo.patch",
      input: { path: ".env", edits: [{ oldText: "A=1", newText: "A=2" }] },
    });
    assert.equal(out.kind, "paused");
    approvalId = out.kind === "paused" ? out.approvalId : "";
    assert.match(approvalId, /^apr_[0-9A-Z]{26}_[0-9A-Z]{26}$/);
    const tail = (await stack.log.read(run.runId, 0)).slice(-4).map((e) => e.event);
    assert.deepEqual(
      tail.map((e) => e.type),
      ["tool.call", "policy.decision", "approval.requested", "run.paused"],
    );
    const req = tail[2]?.payload;
    assert.ok(req?.case === "approvalRequested");
    assert.equal(req.value.preview?.linesAdded, 1);
    assert.match(req.value.preview?.diff ?? "", /-A=1\n\+A=2/);
    assert.ok(req.value.expiresAt, "expiry from policy");
    const r = await box.exec({ argv: ["cat", ".env"], timeoutMs: 5000, maxOutputBytes: 1000 });
    assert.equal(r.stdout, "A=1\n", "nothing written before approval");
    const got = await stack.client.getRun(run.runId);
    assert.equal(got.run?.state, RunState.PAUSED);
    assert.equal(got.run?.pendingApprovalId, approvalId);
  });

  it("ListApprovals shows it with its preview to its tenant only", async () => {
    const mine = await listApprovals();
    const a = mine.approvals.find((x) => x.approvalId === approvalId);
    assert.ok(a);
    assert.equal(a.state, ApprovalState.PENDING);
    assert.equal(a.tool, "repo.patch");
    assert.deepEqual(a.preview?.files, [".env"]);
    const byRun = await listApprovals(TOKENS.acme, run.runId);
    assert.deepEqual(
      byRun.approvals.map((x) => x.approvalId),
      [approvalId],
    );
    const theirs = await listApprovals(TOKENS.globex);
    assert.equal(
      theirs.approvals.some((x) => x.approvalId === approvalId),
      false,
    );
  });

  it("ResolveApproval: NOT_FOUND for another tenant or an unknown id, INVALID_ARGUMENT for garbage", async () => {
    await assertGrpcError(
      resolve(approvalId, ApprovalDecision.APPROVE, TOKENS.globex),
      grpc.status.NOT_FOUND,
    );
    await assertGrpcError(
      resolve(`apr_${run.runId}_${ulid()}`, ApprovalDecision.APPROVE),
      grpc.status.NOT_FOUND,
    );
    await assertGrpcError(
      resolve("nope", ApprovalDecision.APPROVE),
      grpc.status.INVALID_ARGUMENT,
      /approval_id/,
    );
    await assertGrpcError(
      resolve(approvalId, ApprovalDecision.UNSPECIFIED),
      grpc.status.INVALID_ARGUMENT,
      /decision/,
    );
    await assertGrpcError(
      resolve(approvalId, ApprovalDecision.APPROVE, TOKENS.acmeReader),
      grpc.status.PERMISSION_DENIED,
    );
  });

  it("approve is idempotent, a conflicting decision is FAILED_PRECONDITION, and the run becomes resumable", async () => {
    const first = await resolve(approvalId, ApprovalDecision.APPROVE, TOKENS.acme, "looks right");
    assert.equal(first.approval?.state, ApprovalState.APPROVED);
    const again = await resolve(approvalId, ApprovalDecision.APPROVE);
    assert.equal(again.approval?.state, ApprovalState.APPROVED);
    await assertGrpcError(
      resolve(approvalId, ApprovalDecision.DENY),
      grpc.status.FAILED_PRECONDITION,
      /already approved/,
    );
    const resolvedEvents = (await stack.log.read(run.runId, 0)).filter(
      (e) => e.type === "approval.resolved",
    );
    assert.equal(resolvedEvents.length, 1, "one resolution in the log");
    const got = await stack.client.getRun(run.runId);
    assert.equal(got.run?.pendingApprovalId, "", "resumable");
    // The preview's dry run read the file: the approved call only writes (one exec).
    const counting = countingExecs(box);
    const out = await kernel.continueAfterApproval(
      { ...run, sandbox: counting.handle },
      {
        callId: "c4",
        tool: "repo.patch",
        input: { path: ".env", edits: [{ oldText: "A=1", newText: "A=2" }] },
      },
      { approved: true, reason: "" },
    );
    assert.equal(out.kind === "result" && out.ok, true);
    assert.equal(counting.execs(), 1);
    const r = await box.exec({ argv: ["cat", ".env"], timeoutMs: 5000, maxOutputBytes: 1000 });
    assert.equal(r.stdout, "A=2\n");
    // Its start is recorded when it runs, after the person's answer, never before.
    const c4 = (await stack.log.read(run.runId, 0)).filter((e) => {
      const p = e.event.payload;
      return p.case === "toolStarted" || p.case === "toolResult" || p.case === "approvalResolved";
    });
    assert.deepEqual(
      c4.slice(-3).map((e) => e.type),
      ["approval.resolved", "tool.started", "tool.result"],
    );
  });

  it("a denied approval reaches the model as a tool result", async () => {
    const out = await kernel.handle(run, {
      callId: "c5",
      tool: "process.run",
      input: { command: "rm -f hello.txt" },
    });
    assert.equal(out.kind, "paused");
    const id = out.kind === "paused" ? out.approvalId : "";
    assert.deepEqual(out.kind === "paused" && out.preview.argv, ["rm", "-f", "hello.txt"]);
    await resolve(id, ApprovalDecision.DENY, TOKENS.acme, "keep it");
    const res = await kernel.continueAfterApproval(
      run,
      { callId: "c5", tool: "process.run", input: { command: "rm -f hello.txt" } },
      { approved: false, reason: "keep it" },
    );
    assert.equal(res.kind === "result" && res.error?.code, "EAPPROVAL_DENIED");
    const r = await box.exec({ argv: ["cat", "hello.txt"], timeoutMs: 5000, maxOutputBytes: 1000 });
    assert.equal(r.stdout, "hello\n");
  });

  it("an expired approval is denied automatically when next looked at", async () => {
    const past = createKernel({
      log: stack.log,
      policy: () => policy,
      secretProviders: [],
      now: () => Date.now() - 2 * 60 * 60_000,
    });
    const out = await past.handle(run, {
      callId: "c6",
      tool: "process.run",
      input: { command: "rm -f src/a.txt" },
    });
    const id = out.kind === "paused" ? out.approvalId : "";
    assert.ok(id);
    const listed = await listApprovals(TOKENS.acme, run.runId);
    assert.equal(
      listed.approvals.some((a) => a.approvalId === id),
      false,
      "no longer pending",
    );
    await assertGrpcError(
      resolve(id, ApprovalDecision.APPROVE),
      grpc.status.FAILED_PRECONDITION,
      /expired/,
    );
    const ev = (await stack.log.read(run.runId, 0))
      .map((e) => e.event)
      .find((e) => e.payload.case === "approvalResolved" && e.payload.value.approvalId === id);
    assert.ok(ev?.payload.case === "approvalResolved" && ev.payload.value.resolvedBy === "expiry");
  });

  it("an approved patch is written only onto the file its preview was computed from, on any worker", async () => {
    const sh = (cmd: string) =>
      box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 5000, maxOutputBytes: 1000 });
    await sh("printf 'k = 1\\n' > .env.y");
    const call = (callId: string) => ({
      callId,
      tool: "repo.patch",
      input: { path: ".env.y", edits: [{ oldText: "k = 1", newText: "k = 2" }] },
    });
    // Another worker (no plan in memory) continues after the approval.
    const elsewhere = () =>
      createKernel({ log: stack.log, policy: () => policy, secretProviders: [] });
    const paused = await kernel.handle(run, call("c-base-1"));
    assert.equal(paused.kind, "paused");
    assert.match(
      paused.kind === "paused" ? (paused.preview.baseSha256 ?? "") : "",
      /^[0-9a-f]{64}$/,
    );
    await sh("printf 'k = 1\\nchanged = yes\\n' > .env.y");
    const refused = await elsewhere().continueAfterApproval(run, call("c-base-1"), {
      approved: true,
      reason: "",
    });
    assert.equal(refused.kind === "result" && refused.error?.code, "ECONFLICT");
    assert.match(
      refused.kind === "result" ? (refused.error?.message ?? "") : "",
      /approval preview/,
    );
    assert.equal((await sh("cat .env.y")).stdout, "k = 1\nchanged = yes\n");

    assert.equal((await kernel.handle(run, call("c-base-2"))).kind, "paused");
    const ok = await elsewhere().continueAfterApproval(run, call("c-base-2"), {
      approved: true,
      reason: "",
    });
    assert.equal(ok.kind === "result" && ok.ok, true, JSON.stringify(ok));
    assert.equal((await sh("cat .env.y")).stdout, "k = 2\nchanged = yes\n");
  });

  it("a preview's plan serves only its own run's call, even when another run uses the same call id", async () => {
    // A second run in its own container: the same file, the same call id, another edit.
    const created = await stack.client.createRun({ prompt: "other run" });
    const otherId = created.run?.runId as string;
    const t = await testSandbox();
    try {
      const otherBox = await t.sandbox.create({
        runId: otherId,
        tenantId: "acme",
        image: sandboxImage("test"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace([
          { path: ".env.x", type: "file", mode: 0o644, data: Buffer.from("token = none\n") },
        ]),
      });
      await box.exec({
        argv: ["sh", "-c", "printf 'token = none\\n' > .env.x"],
        timeoutMs: 5000,
        maxOutputBytes: 1000,
      });
      const fence = await stack.log.bumpEpoch(otherId);
      const other: KernelRun = {
        runId: otherId,
        sessionId: created.run?.sessionId as string,
        fence,
        sandbox: otherBox,
      };
      const edit = (text: string) => ({
        callId: "same",
        tool: "repo.patch",
        input: { path: ".env.x", edits: [{ oldText: "none", newText: text }] },
      });
      assert.equal((await kernel.handle(run, edit("approved-by-A"))).kind, "paused");
      assert.equal((await kernel.handle(other, edit("B-SECRET"))).kind, "paused");
      const out = await kernel.continueAfterApproval(run, edit("approved-by-A"), {
        approved: true,
        reason: "",
      });
      assert.equal(out.kind === "result" && out.ok, true);
      const cat = (b: SandboxHandle) =>
        b.exec({ argv: ["cat", ".env.x"], timeoutMs: 5000, maxOutputBytes: 1000 });
      assert.equal((await cat(box)).stdout, "token = approved-by-A\n");
      assert.equal((await cat(otherBox)).stdout, "token = none\n");
    } finally {
      await t.cleanup();
    }
  });
});

describe("secrets", () => {
  it("resolves $ENV placeholders just in time and redacts the value everywhere, plain and encoded", async () => {
    const call = {
      callId: "s1",
      tool: "process.run",
      input: {
        command:
          "echo $ENV.DEMO_TOKEN; printf %s $ENV.DEMO_TOKEN | base64; printf 'x=%s' $ENV.DEMO_TOKEN | od -c | head -1",
      },
    };
    // A taint of its own: the secret exec holds the container's kernel state (every later
    // exec of that run would wait for a person, secret-containment-kernel-state.test.ts);
    // this test is about redaction, and the later tests share the run.
    const own: KernelRun = { ...run, taint: new Map() };
    const out = await kernel.handle(own, call);
    assert.equal(out.kind, "paused", "touching a secret asks a person");
    await resolve(out.kind === "paused" ? out.approvalId : "", ApprovalDecision.APPROVE);
    const res = await kernel.continueAfterApproval(own, call, { approved: true, reason: "" });
    assert.equal(res.kind === "result" && res.ok, true, JSON.stringify(res));
    const stdout = res.kind === "result" ? (res.output as { stdout: string }).stdout : "";
    assert.match(stdout, /\[REDACTED\]/);
    const all = (await eventsJson()).join("\n");
    assert.equal(all.includes(SECRET), false, "the value is in no event");
    assert.equal(
      all.includes(Buffer.from(SECRET).toString("base64").slice(0, 24)),
      false,
      "nor its base64",
    );
    assert.ok(all.includes("$ENV.DEMO_TOKEN"), "the placeholder is what the log shows");
    for (const s of exporter.getFinishedSpans())
      assert.equal(JSON.stringify(s.attributes).includes(SECRET), false);
  });

  it("key rules redact command output but leave source code read by repo.read intact", async () => {
    await box.exec({
      argv: ["sh", "-c", "echo 'const token = getToken();' > auth.js"],
      timeoutMs: 5000,
      maxOutputBytes: 1000,
    });
    const read = await kernel.handle(run, {
      callId: "k1",
      tool: "repo.read",
      input: { path: "auth.js" },
    });
    assert.equal(
      read.kind === "result" && (read.output as { content: string }).content,
      "const token = getToken();\n",
    );
    const out = await kernel.handle(run, {
      callId: "k2",
      tool: "process.run",
      input: { command: "echo GITHUB_TOKEN=abc123def" },
    });
    assert.equal(
      out.kind === "result" && (out.output as { stdout: string }).stdout,
      "GITHUB_TOKEN=[REDACTED]\n",
    );
  });

  it("a missing secret fails the call with ESECRET_NOT_FOUND; a secret not allowed with EPERMISSION", async () => {
    for (const [name, code] of [
      ["MISSING_TOKEN", "ESECRET_NOT_FOUND"],
      ["OTHER_TOKEN", "EPERMISSION"],
    ] as const) {
      const call = {
        callId: `s-${name}`,
        tool: "process.run",
        input: { command: `echo $ENV.${name}` },
      };
      const out = await kernel.handle(run, call);
      await resolve(out.kind === "paused" ? out.approvalId : "", ApprovalDecision.APPROVE);
      const res = await kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
      assert.equal(res.kind === "result" && res.error?.code, code);
    }
  });
});

describe("result envelope: every result fits one event", () => {
  let dir = "";
  let store: FsArtifactStore;
  let big: Kernel;
  let bare: Kernel;
  const sizes: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "agentd-kernel-artifacts-"));
    store = new FsArtifactStore(dir);
    const opts = { log: stack.log, policy: () => policy, secretProviders: [] };
    big = createKernel({ ...opts, artifacts: store });
    bare = createKernel(opts);
  });
  after(async () => {
    if (sizes.length > 0) console.log(`largest event per scenario:\n  ${sizes.join("\n  ")}`);
    await rm(dir, { recursive: true, force: true });
  });

  const artifactText = async (digest: string): Promise<string> => {
    const parts: Uint8Array[] = [];
    for await (const c of store.read(digest)) parts.push(c);
    return Buffer.concat(parts).toString("utf8");
  };

  /** Runs the call; checks exactly one ok, truncated, fitting tool.result; answers it. */
  async function runBig(k: Kernel, callId: string, tool: string, input: unknown) {
    const out = await k.handle(run, { callId, tool, input });
    assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out).slice(0, 500));
    const events = await stack.log.read(run.runId, 0);
    const mine = events.filter((e) => {
      const p = e.event.payload;
      return (
        (p.case === "toolCall" ||
          p.case === "toolOutput" ||
          p.case === "policyDecision" ||
          p.case === "toolResult") &&
        p.value.callId === callId
      );
    });
    const results = mine.filter((e) => e.type === "tool.result");
    assert.equal(results.length, 1, "exactly one tool.result");
    const largest = Math.max(...mine.map((e) => Buffer.byteLength(e.json)));
    assert.ok(largest <= MAX_EVENT_BYTES, `largest event ${largest} bytes`);
    sizes.push(`${callId}: ${largest} bytes (${mine.length} events)`);
    const p = results[0]?.event.payload;
    assert.ok(p?.case === "toolResult");
    assert.equal(p.value.ok, true);
    assert.equal(p.value.truncated, true);
    const stored = JSON.parse(p.value.outputJson) as { result?: unknown };
    const view = (stored.result ?? stored) as Record<string, string>;
    assert.deepEqual(out.kind === "result" && out.output, view, "the model sees the event's form");
    const emitted = events.find(
      (e) =>
        e.event.payload.case === "artifactEmitted" &&
        e.event.payload.value.name === `tool-output/${callId}`,
    );
    return { result: p.value, view, emitted, seq: results[0]?.seq ?? 0 };
  }

  /** The full output from the artifact the result names (after artifact.emitted). */
  async function fullOutput(
    r: Awaited<ReturnType<typeof runBig>>,
  ): Promise<Record<string, string>> {
    assert.match(r.result.outputDigest, /^[0-9a-f]{64}$/);
    assert.ok(r.emitted, "artifact.emitted names the full output");
    const emitted = r.emitted.event.payload;
    assert.equal(emitted.case === "artifactEmitted" && emitted.value.digest, r.result.outputDigest);
    assert.ok(r.emitted.seq < r.seq, "the artifact is announced before the result");
    const full = JSON.parse(await artifactText(r.result.outputDigest)) as { result?: unknown };
    return (full.result ?? full) as Record<string, string>;
  }

  const marker =
    /\n\[agentd: (\d+) bytes left out here; the full output is artifact sha256:([0-9a-f]{64})\]\n/;

  function assertHeadTail(cut: string, full: string, digest: string): void {
    const m = marker.exec(cut);
    assert.ok(m, "a visible marker");
    assert.equal(m[2], digest, "the marker says where the full output is");
    const [head, tail] = cut.split(m[0]) as [string, string];
    assert.ok(head.length > 1000 && tail.length > 1000, "head and tail both kept");
    assert.ok(full.startsWith(head), "head");
    assert.ok(full.endsWith(tail), "tail");
    assert.equal(
      Buffer.byteLength(head) + Number(m[1]) + Buffer.byteLength(tail),
      Buffer.byteLength(full),
      "the marker counts exactly the bytes left out",
    );
  }

  const gen = (n: number, tr: string) => `head -c ${n} /dev/zero | tr '\\0' '${tr}'`;
  const cases: [string, string, string][] = [
    [
      "600 KB",
      `echo HEAD; ${gen(600_000, "a")}; echo; echo GITHUB_TOKEN=abc123def; ${gen(200_000, "b")}; echo TAIL`,
      "a",
    ],
    ["1 MiB (the cap)", `echo HEAD; ${gen(1024 * 1024 - 11, "a")}; echo TAIL`, "a"],
    ["NUL bytes", `echo HEAD; head -c 700000 /dev/zero; echo TAIL`, "\u0000"],
    ["quotes", `echo HEAD; ${gen(700_000, '"')}; echo TAIL`, '"'],
    ["backslashes", `echo HEAD; ${gen(700_000, "\\\\")}; echo TAIL`, "\\"],
    ["invalid UTF-8", `echo HEAD; ${gen(700_000, "\\377")}; echo TAIL`, "\ufffd"],
    [
      "4-byte emoji",
      `echo HEAD; yes '😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀' | head -n 9000; echo TAIL`,
      "😀",
    ],
  ];
  for (const [name, command, unit] of cases) {
    it(`process.run printing ${name}: head and tail in the event, the full redacted output stored`, async () => {
      const callId = `big-${name.replace(/\W+/g, "-")}`;
      const r = await runBig(big, callId, "process.run", { command });
      const stdout = (await fullOutput(r)).stdout ?? "";
      assert.ok(stdout.startsWith("HEAD\n") && stdout.endsWith("TAIL\n"));
      assert.ok(stdout.includes(unit.repeat(20)), "the output as the process wrote it");
      assertHeadTail(r.view.stdout ?? "", stdout, r.result.outputDigest);
      // Key rules apply to outputs; the call's record and its preview keep the command as
      // written (a resumed call is rebuilt from them).
      const outputs = (await eventsJson()).filter((j) => j.includes('"toolOutput"'));
      const all = [...outputs, stdout, r.view.stdout ?? ""].join("\n");
      assert.equal(all.includes("abc123def"), false, "redacted in the output, live and stored");
      if (name === "600 KB") assert.ok(stdout.includes("GITHUB_TOKEN=[REDACTED]"));
    });
  }

  it("process.run printing 5 MB: the cap stops the process; the result fits and shows the cap's note at the end", async () => {
    const r = await runBig(big, "big-5mb", "process.run", {
      command: `echo HEAD; ${gen(5_000_000, "z")}; echo TAIL`,
    });
    const full = await fullOutput(r);
    assert.equal(full.truncated as unknown, true, "the tool cut it");
    assert.match(
      full.stdout ?? "",
      /\[agentd: output truncated at 1048576 bytes; the process was stopped\]\n$/,
    );
    assert.equal(full.stdout?.includes("TAIL"), false);
    assertHeadTail(r.view.stdout ?? "", full.stdout ?? "", r.result.outputDigest);
  });

  it("both streams large: each keeps its head and tail", async () => {
    const r = await runBig(big, "big-both", "process.run", {
      command: `echo OUT; ${gen(450_000, "o")}; echo END-OUT; (echo ERR; ${gen(450_000, "e")}; echo END-ERR) >&2`,
    });
    const full = await fullOutput(r);
    assertHeadTail(r.view.stdout ?? "", full.stdout ?? "", r.result.outputDigest);
    assertHeadTail(r.view.stderr ?? "", full.stderr ?? "", r.result.outputDigest);
  });

  it("without an artifact store: head and tail only, no digest, the marker says so", async () => {
    const r = await runBig(bare, "big-bare", "process.run", { command: gen(900_000, '"') });
    assert.equal(r.result.outputDigest, "");
    assert.equal(r.emitted, undefined);
    assert.match(r.view.stdout ?? "", /bytes left out here; the full output was not kept\]/);
  });

  it("repo.read at its cap: content head and tail in the event, the full read stored", async () => {
    await box.exec({
      argv: ["sh", "-c", `mkdir -p big && { echo HEAD; ${gen(400_000, '"')}; } > big/quotes.txt`],
      timeoutMs: 20_000,
      maxOutputBytes: 1000,
    });
    const read = await runBig(big, "big-read", "repo.read", { path: "big/quotes.txt" });
    const full = await fullOutput(read);
    assert.equal(Buffer.byteLength(full.content ?? ""), 256 * 1024, "cut at maxFileRead");
    assert.ok(full.content?.startsWith("HEAD\n"));
    assertHeadTail(read.view.content ?? "", full.content ?? "", read.result.outputDigest);
  });

  it("repo.search at its cap (200 matches of 490 control characters): first and last matches kept", async () => {
    // ripgrep is in the base image only: a run of its own in a Debian container.
    const line = (i: number) => `needle ${String(i).padStart(3, "0")} ${"\u0001".repeat(490)}\n`;
    const created = await stack.client.createRun({ prompt: "search at its cap" });
    const t = await testSandbox();
    try {
      const sbox = await t.sandbox.create({
        runId: created.run?.runId as string,
        tenantId: "acme",
        image: sandboxImage("base"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace([
          {
            path: "lines.txt",
            type: "file",
            mode: 0o644,
            data: Buffer.from(Array.from({ length: 300 }, (_, i) => line(i + 1)).join("")),
          },
        ]),
      });
      const other: KernelRun = {
        runId: created.run?.runId as string,
        sessionId: created.run?.sessionId as string,
        fence: await stack.log.bumpEpoch(created.run?.runId as string),
        sandbox: sbox,
      };
      const out = await big.handle(other, {
        callId: "big-search",
        tool: "repo.search",
        input: { query: "needle" },
      });
      assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out).slice(0, 300));
      const ev = (await stack.log.read(other.runId, 0)).findLast((e) => e.type === "tool.result");
      const p = ev?.event.payload;
      assert.ok(ev && p?.case === "toolResult");
      assert.ok(Buffer.byteLength(ev.json) <= MAX_EVENT_BYTES);
      sizes.push(`big-search: ${Buffer.byteLength(ev.json)} bytes`);
      assert.equal(p.value.truncated, true);
      const view = JSON.parse(p.value.outputJson) as { matches: ({ line: number } | string)[] };
      assert.deepEqual(out.kind === "result" && out.output, view);
      const full = JSON.parse(await artifactText(p.value.outputDigest)) as {
        matches: { line: number; text: string }[];
      };
      assert.equal(full.matches.length, 200, "maxSearchMatches");
      assert.equal(full.matches[0]?.text, line(1).slice(0, -1));
      const kept = view.matches;
      assert.deepEqual(kept[0], full.matches[0], "the first match");
      assert.deepEqual(kept.at(-1), full.matches[199], "the last match");
      assert.ok(
        kept.some(
          (m) =>
            typeof m === "string" && /items left out here; the full output is artifact/.test(m),
        ),
      );
    } finally {
      await t.cleanup();
    }
  });
});

describe("totality: every input ends in a decision and a typed result", () => {
  /** The events of a call: tool.call, policy.decision, tool.result (all fitting). */
  async function eventsOf(callId: string) {
    const evs = (await stack.log.read(run.runId, 0)).filter((e) => {
      const p = e.event.payload;
      return (
        (p.case === "toolCall" || p.case === "policyDecision" || p.case === "toolResult") &&
        p.value.callId === callId
      );
    });
    for (const e of evs) assert.ok(Buffer.byteLength(e.json) <= MAX_EVENT_BYTES);
    return evs.map((e) => e.event.payload);
  }

  async function refused(k: Kernel, callId: string, tool: string, input: unknown) {
    const out = await k.handle(run, { callId, tool, input });
    assert.equal(out.kind, "result");
    const evs = await eventsOf(callId);
    assert.deepEqual(
      evs.map((p) => p.case),
      ["toolCall", "policyDecision", "toolResult"],
    );
    const result = evs[2];
    assert.ok(result?.case === "toolResult");
    assert.equal(result.value.ok, false);
    assert.equal(out.kind === "result" && out.error?.code, result.value.error?.code);
    return { code: result.value.error?.code, message: result.value.error?.message ?? "", evs };
  }

  it("a 64 KB path is EVALIDATION naming the field (the jail's length limit throws inside assessment)", async () => {
    const r = await refused(kernel, "t-path", "repo.read", { path: "a/".repeat(32 * 1024) });
    assert.equal(r.code, "EVALIDATION");
    assert.match(r.message, /^path: is longer than 4096 characters/);
  });

  it("an input too large to record is EVALIDATION on input; the call record keeps head and tail", async () => {
    const r = await refused(kernel, "t-huge", "repo.patch", {
      path: "x.txt",
      edits: [{ oldText: "", newText: "\u0000".repeat(1_000_000) }],
    });
    assert.equal(r.code, "EVALIDATION");
    assert.match(r.message, /repo\.patch: input: \d+ bytes of JSON, too large to record/);
    const call = r.evs[0];
    assert.ok(call?.case === "toolCall");
    assert.match(call.value.inputJson, /left out of the recorded input/);
    assert.ok(call.value.inputJson.startsWith('{"edits":[{"newText":"\\u0000'));
  });

  it("unknown tools with huge names, non-object inputs and deep nesting are refused, never thrown", async () => {
    let deep: unknown = 0;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    for (const [i, [tool, input, code]] of (
      [
        ["x".repeat(1_000_000), {}, "EPOLICY"],
        ["repo.read", null, "EVALIDATION"],
        ["repo.read", [1, 2], "EVALIDATION"],
        ["process.run", "rm -rf /", "EVALIDATION"],
        ["repo.search", deep, "EVALIDATION"],
        ["repo.read", JSON.parse('{"__proto__":{"path":"hello.txt"}}'), "EVALIDATION"],
        // Lone surrogates echoed into events would make them undecodable (invalid UTF-8).
        ["repo.\ud800read", {}, "EPOLICY"],
        ["repo.read", { path: "a\udc00b", "\ud800": 1 }, "EVALIDATION"],
        ["repo.read", { path: "no\ud800such" }, "ENOTFOUND"],
      ] as const
    ).entries()) {
      const r = await refused(kernel, `t-odd-${i}`, tool, input);
      assert.equal(r.code, code, `${i}: ${r.message.slice(0, 200)}`);
    }
  });

  it("an assessment that throws is a refusal by kernel.decide (EPOLICY), whatever risk.ts does", async () => {
    const throwing = createKernel({
      log: stack.log,
      secretProviders: [],
      policy: () => ({
        ...policy,
        risk: {
          ...policy.risk,
          get denyCommands(): string[] {
            throw new TypeError("boom in assessment");
          },
        },
      }),
    });
    const r = await refused(throwing, "t-assess", "process.run", { command: "echo hi" });
    assert.equal(r.code, "EPOLICY");
    assert.match(r.message, /could not be assessed \(boom in assessment\)/);
    const d = r.evs[1];
    assert.equal(d?.case === "policyDecision" && d.value.rule, "kernel.decide");
  });

  it("a trust lookup that fails is a refusal; the log's own errors propagate", async () => {
    const failing = (err: Error) =>
      createKernel({
        log: stack.log,
        policy: () => policy,
        secretProviders: [],
        trustCounters: async () => {
          throw err;
        },
      });
    const r = await refused(failing(new Error("bug")), "t-trust", "repo.read", {
      path: "hello.txt",
    });
    assert.equal(r.code, "EPOLICY");
    assert.match(r.message, /trust counters \(Error: bug\)/);
    await assert.rejects(
      failing(new AgentdError("EUNAVAILABLE", "redis is down")).handle(run, {
        callId: "t-trust-storage",
        tool: "repo.read",
        input: { path: "hello.txt" },
      }),
      (e) => isAgentdError(e, "EUNAVAILABLE"),
    );
  });
});

describe("tracing and integrity", () => {
  it("one kernel.decide span per decision, child of the tool-call span, with the policy attributes", () => {
    const spans = exporter.getFinishedSpans();
    const decides = spans.filter((s) => s.name === "kernel.decide");
    assert.ok(decides.length >= 8);
    for (const d of decides) {
      const parent = spans.find((s) => s.spanContext().spanId === d.parentSpanContext?.spanId);
      assert.equal(parent?.name, `execute_tool ${d.attributes["gen_ai.tool.name"]}`);
      assert.equal(parent?.attributes["gen_ai.tool.call.id"], d.attributes["gen_ai.tool.call.id"]);
      for (const k of [
        "gen_ai.tool.name",
        "agentd.policy.decision",
        "agentd.policy.rule",
        "agentd.risk.category",
        "agentd.risk.estimated_impact",
      ]) {
        assert.ok(d.attributes[k] !== undefined, `${k} on kernel.decide`);
      }
    }
    // The sandbox work of a call that ran is a child of its execute_tool span.
    const works = spans.filter((s) => s.name.startsWith("sandbox "));
    assert.ok(works.length >= 1, "a sandbox span for a call that ran");
    for (const w of works) {
      const parent = spans.find((s) => s.spanContext().spanId === w.parentSpanContext?.spanId);
      assert.equal(parent?.name, `execute_tool ${w.name.slice("sandbox ".length)}`);
    }
    const deny = decides.find((d) => d.attributes["gen_ai.tool.call.id"] === "c3");
    assert.equal(deny?.attributes["agentd.policy.decision"], "deny");
    assert.match(String(deny?.attributes["agentd.policy.rule"]), /denyCommands:sudo/);
  });

  it("every decision event matches its span; the chain verifies; a stale owner is fenced", async () => {
    const events = (await stack.log.read(run.runId, 0)).map((e) => e.event);
    const decisions = events.filter((e) => e.payload.case === "policyDecision");
    const spans = exporter.getFinishedSpans();
    const ofRun = spans.filter(
      (d) =>
        d.name === "kernel.decide" &&
        spans.find((s) => s.spanContext().spanId === d.parentSpanContext?.spanId)?.attributes[
          "agentd.run.id"
        ] === run.runId,
    );
    assert.equal(decisions.length, ofRun.length);
    assert.equal(
      verifyChain(events.map((e) => toJson(EventSchema, e) as Record<string, unknown>)).ok,
      true,
    );
    await stack.log.bumpEpoch(run.runId);
    await assert.rejects(
      kernel.handle(run, { callId: "late", tool: "repo.read", input: { path: "hello.txt" } }),
      (e) => isAgentdError(e, "EFENCED"),
    );
  });
});
