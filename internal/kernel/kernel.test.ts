/**
 * The kernel end to end against real components: a private Redis behind a real `agentd
 * server` process (approvals over gRPC with grpc-js), a real container for previews and
 * execution, and the OpenTelemetry SDK's in-memory exporter for the spans.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { create, toJson } from "@bufbuild/protobuf";
import { trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { ApprovalDecision, EventSchema, RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
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
    labels: { repo: "acme/app" },
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
  it("auto: a read runs at once; tool.call, policy.decision and tool.result are in the log", async () => {
    const out = await kernel.handle(run, {
      callId: "c1",
      tool: "repo.read",
      input: { path: "hello.txt" },
    });
    assert.equal(out.kind === "result" && out.ok, true, JSON.stringify(out));
    assert.equal(out.kind === "result" && (out.output as { content: string }).content, "hello\n");
    const types = (await stack.log.read(run.runId, 2)).map((e) => e.type);
    assert.deepEqual(types, ["tool.call", "policy.decision", "tool.result"]);
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

  it("invalid input is refused with the field named, before anything runs", async () => {
    const out = await kernel.handle(run, { callId: "c3b", tool: "repo.read", input: { path: 7 } });
    assert.equal(out.kind === "result" && out.error?.code, "EPOLICY");
    assert.match(out.kind === "result" ? (out.error?.message ?? "") : "", /path/);
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
    const out = await kernel.handle(run, call);
    assert.equal(out.kind, "paused", "touching a secret asks a person");
    await resolve(out.kind === "paused" ? out.approvalId : "", ApprovalDecision.APPROVE);
    const res = await kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
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

describe("tracing and integrity", () => {
  it("one kernel.decide span per decision, child of the tool-call span, with the policy attributes", () => {
    const spans = exporter.getFinishedSpans();
    const decides = spans.filter((s) => s.name === "kernel.decide");
    assert.ok(decides.length >= 8);
    for (const d of decides) {
      const parent = spans.find((s) => s.spanContext().spanId === d.parentSpanContext?.spanId);
      assert.equal(parent?.name, "execute_tool");
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
