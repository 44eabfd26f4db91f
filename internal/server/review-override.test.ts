/**
 * The model reviewer and OverrideReview end to end: a real `agentd dev` (embedded log,
 * worker, Docker sandbox) with `process.run: { approval: reviewer }`, and one scripted
 * OpenAI-compatible stub serving both the agent (streamed tool calls) and the reviewer
 * (plain completions): the reviewer allows the first command (it runs) and asks a person
 * for the second (the run pauses). Over gRPC: an override of the pending ask is refused
 * (ResolveApproval answers it); an override of the allow that already ran is recorded in
 * the run's log with `attention`; a caller without the approve role, a bad verdict and a
 * missing reason are refused naming the field; after the run ended, an override still
 * lands, in the tenant feed (WatchEvents).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { status } from "@grpc/grpc-js";
import { ApprovalDecision, type Event } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";
import { sandboxImage } from "../testing/docker.ts";
import { assertGrpcError, GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type OpenAiStub,
  type StubReply,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-review-override-"));
let stub: OpenAiStub;
let dev: AgentdProcess;
let client: GrpcRunClient;
const ADMIN = "approver-token";
const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const READER = "reader-token";

const POLICY = `${readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8")
  .replace(/# image: agentd-sandbox-base:latest/, `image: ${sandboxImage("test")}`)
  .replace(
    /process\.run: \{ approval: risk, timeout: 5m \}/,
    "process.run: { approval: reviewer }",
  )}
reviewer:
  model: stub-reviewer
  rubric: Writing one.txt is fine. Anything else needs a person.
  timeout: 2m
`;

/** The reviewer's answer as a chat completion (not streamed). */
function reviewerReply(verdict: string, confidence: number): StubReply {
  return {
    status: 200,
    body: {
      id: "rv",
      object: "chat.completion",
      created: 0,
      model: "stub-reviewer",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: JSON.stringify({ verdict, reasoning: `scripted ${verdict}`, confidence }),
          },
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    },
  };
}

function agentStep(toolResults: number): StubReply {
  const cmd = ["echo one > one.txt", "echo two > two.txt"][toolResults];
  if (cmd === undefined) return { chunks: textReply(["done"]) };
  const call = {
    id: `c${toolResults + 1}`,
    name: "process_run",
    arguments: JSON.stringify({ command: cmd }),
  };
  return { chunks: toolCallsReply([call]) };
}

before(async () => {
  stub = await startOpenAiStub(({ body }) => {
    const text = JSON.stringify(body.messages);
    if (body.model === "stub-reviewer")
      return text.includes("echo two") ? reviewerReply("ask", 0.9) : reviewerReply("allow", 0.95);
    return agentStep((text.match(/"role":"tool"/g) ?? []).length);
  });
  writeFileSync(join(dir, "policy.yaml"), POLICY);
  writeFileSync(
    join(dir, "auth.yaml"),
    `tokens:
  - { sha256: ${sha256Hex(ADMIN)}, tenant: acme, roles: [submit, read, approve] }
  - { sha256: ${sha256Hex(READER)}, tenant: acme, roles: [submit, read] }
`,
  );
  dev = await startAgentd(
    "dev",
    [
      ...["--data-dir", join(dir, "data"), "--auth-file", join(dir, "auth.yaml")],
      ...["--policy", join(dir, "policy.yaml"), "--model", "agent-model"],
      ...["--approval-hold-ms", "0"],
    ],
    { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
  );
  client = new GrpcRunClient(dev.addr);
});

after(async () => {
  client?.close();
  await dev?.stop("SIGTERM").catch(() => undefined);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function history(runId: string): Promise<Event[]> {
  const h = client.streamEvents({ runId, historyOnly: true }, ADMIN);
  await h.end(30_000);
  return h.events;
}

/** Polls the run's log (generously: a loaded machine starts a sandbox slowly). */
async function waitFor<V>(what: string, runId: string, probe: (es: Event[]) => V | undefined) {
  const deadline = Date.now() + Number(process.env.RV_WAIT ?? 240_000);
  while (Date.now() < deadline) {
    const v = probe(await history(runId));
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 250));
  }
  const seen = (await history(runId)).map(
    (e) =>
      `${e.type} ${JSON.stringify(e.payload.value, (_k, v) => (typeof v === "bigint" ? String(v) : v)).slice(0, 300)}`,
  );
  throw new Error(
    `run ${runId}: no ${what} within 240 s\n${seen.join("\n")}\n${dev.output().slice(-4000)}`,
  );
}

/** bin/agentctl against the dev server with the approver token. */
function agentctl(
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("AGENTD_")) env[k] = v;
  Object.assign(env, { AGENTD_ADDR: `http://${dev.addr}`, AGENTD_TOKEN: ADMIN, NO_COLOR: "1" });
  const child = spawn(AGENTCTL, args, { env, stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

const override = (init: Record<string, string>, token = ADMIN) =>
  client.unary(RunService.method.overrideReview, init, token);

describe("model reviewer over agentd dev, and OverrideReview", { timeout: 600_000 }, () => {
  it("records the reviewer's verdicts, and every override as the rules say", async () => {
    const feed: Event[] = [];
    const watch = client.serverStream(RunService.method.watchEvents, {}, ADMIN);
    watch.on("data", (m: { event?: Event }) => m.event && feed.push(m.event));
    watch.on("error", () => undefined);

    const { run } = await client.createRun(
      { prompt: "write the files", workspaceTar: await tarOf([{ name: "a.txt", data: "a\n" }]) },
      ADMIN,
    );
    const runId = run?.runId as string;
    const approvalId = await waitFor("a pending approval", runId, (es) => {
      const r = es.find((e) => e.payload.case === "approvalRequested");
      return r?.payload.case === "approvalRequested" ? r.payload.value.approvalId : undefined;
    });
    const events = await history(runId);
    const verdicts = events.flatMap((e) =>
      e.payload.case === "reviewerVerdict" ? [{ type: e.type, ...e.payload.value }] : [],
    );
    assert.deepEqual(
      verdicts.map((v) => [v.type, v.callId, v.verdict, v.model]),
      [
        ["reviewer.verdict", "c1", "allow", "stub-reviewer"],
        ["reviewer.verdict", "c2", "ask", "stub-reviewer"],
      ],
    );
    assert.equal(verdicts[1]?.approvalId, approvalId);
    const ran = events.find(
      (e) => e.payload.case === "toolResult" && e.payload.value.callId === "c1",
    );
    assert.ok(ran?.payload.case === "toolResult" && ran.payload.value.ok, "c1 ran after the allow");

    // The ask is still pending: a person answers it with ResolveApproval, not here.
    await assertGrpcError(
      override({ approvalId, verdict: "deny", reason: "no" }),
      status.FAILED_PRECONDITION,
      /still pending: resolve it with ResolveApproval/,
    );
    // Hostile and unauthorised overrides.
    await assertGrpcError(
      override({ runId, callId: "c1", verdict: "deny", reason: "no" }, READER),
      status.PERMISSION_DENIED,
      /approve/,
    );
    await assertGrpcError(
      override({ runId, callId: "c1", verdict: "maybe\u001b[31m", reason: "x" }),
      status.INVALID_ARGUMENT,
      /verdict/,
    );
    await assertGrpcError(
      override({ runId, callId: "c1", verdict: "deny", reason: " " }),
      status.INVALID_ARGUMENT,
      /reason: is required/,
    );
    await assertGrpcError(
      override({ runId, callId: "c1", verdict: "allow", reason: "same" }),
      status.INVALID_ARGUMENT,
      /already \(allow\)/,
    );
    await assertGrpcError(
      override({ runId, callId: "nope", verdict: "deny", reason: "x" }),
      status.NOT_FOUND,
      /no reviewer verdict for call nope/,
    );

    // The allow already ran: the override is recorded with attention, in the run's log.
    const done = await override({
      runId,
      callId: "c1",
      verdict: "deny",
      reason: "one.txt was wrong",
    });
    assert.ok(done.seq > 0n);
    assert.equal(done.override?.attention, true);
    assert.equal(done.override?.overriddenBy, "acme#0"); // the approver token's principal
    const logged = (await history(runId)).find((e) => e.payload.case === "reviewerOverridden");
    assert.ok(logged?.payload.case === "reviewerOverridden");
    assert.equal(logged.type, "reviewer.overridden");
    assert.equal(BigInt(logged.seq), done.seq);
    assert.deepEqual(
      [
        logged.payload.value.previousVerdict,
        logged.payload.value.verdict,
        logged.payload.value.reason,
      ],
      ["allow", "deny", "one.txt was wrong"],
    );

    // A person approves c2; the run completes; the reviewer's ask can now be overridden,
    // and with the log closed the override goes to the tenant feed.
    await client.unary(
      RunService.method.resolveApproval,
      { approvalId, decision: ApprovalDecision.APPROVE, reason: "ok" },
      ADMIN,
    );
    const resolved = (await history(runId)).find((e) => e.payload.case === "approvalResolved");
    assert.ok(resolved?.payload.case === "approvalResolved");
    assert.equal(
      resolved.payload.value.reviewerVerdict,
      "ask",
      "the person answered over the reviewer's ask",
    );
    await waitFor("the run's end", runId, (es) =>
      es.find((e) => e.type === "run.completed" || e.type === "run.failed"),
    );
    const { run: ended } = await client.getRun(runId, ADMIN);
    assert.equal(ended?.state, RunState.COMPLETED);
    // agentctl review override, with a hostile reason: recorded, and printed escaped.
    const late = await agentctl([
      ...["review", "override", approvalId, "--verdict", "deny"],
      ...["--reason", "should not have asked \u001b[31m"],
    ]);
    assert.equal(late.code, 0, late.stderr);
    assert.match(
      late.stdout,
      /reviewer ask → deny, recorded at the tenant feed \(the run had ended\)/,
    );
    const json = await agentctl([
      "review",
      "override",
      "c2",
      "--run",
      runId,
      "--verdict",
      "allow",
      "--reason",
      "x",
      "--json",
    ]);
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).previousVerdict, "ask");
    // agentctl events shows the verdicts and the override, control characters escaped.
    const shown = await agentctl(["events", runId]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /reviewer\.verdict +c1 allow \(stub-reviewer: allow 0\.95\)/);
    assert.match(shown.stdout, /reviewer\.verdict +c2 ask \(stub-reviewer: ask 0\.90\) apr_/);
    assert.match(
      shown.stdout,
      /reviewer\.overridden +c1 allow → deny by acme#0 ATTENTION: one\.txt was wrong/,
    );
    assert.equal(shown.stdout.includes("\u001b"), false);
    const deadline = Date.now() + 60_000;
    while (
      !feed.some(
        (e) => e.payload.case === "reviewerOverridden" && e.payload.value.approvalId === approvalId,
      )
    ) {
      if (Date.now() > deadline) throw new Error("the late override never reached the tenant feed");
      await new Promise((r) => setTimeout(r, 100));
    }
    watch.cancel();
  });
});
