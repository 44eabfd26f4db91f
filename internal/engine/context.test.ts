/**
 * The context assembler and the compactor on realistic event sequences: text, tool calls,
 * a policy denial, an approval granted and one denied, a pending call, a checkpoint, and a
 * budget overrun compacted into a checkpoint that makes the next assembly fit.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { typeOfPayload } from "../eventlog/event-codec.ts";
import { ApprovalDecision, Decision, type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import {
  compactContext,
  extractFacts,
  MAX_CHECKPOINT_SUMMARY_BYTES,
  renderSummary,
} from "./compactor.ts";
import {
  assembleContext,
  type ContextMessage,
  capJson,
  estimateMessageTokens,
  estimateTokens,
} from "./context.ts";
import type { EngineMessage } from "./port.ts";
import type { Skill } from "./skills.ts";

type Payload = MessageInitShape<typeof EventSchema>["payload"];

/** A log under construction: seq assigned in order, as the event log would. */
class Log {
  events: Event[] = [];
  add(payload: Payload): number {
    const seq = this.events.length + 1;
    const p = payload as Exclude<Event["payload"], { case: undefined }>;
    this.events.push(
      create(EventSchema, {
        runId: "01JRUN0000000000000000000",
        sessionId: "s",
        seq: BigInt(seq),
        type: typeOfPayload(p),
        payload,
      }),
    );
    return seq;
  }
  call(callId: string, tool: string, input: unknown): number {
    return this.add({
      case: "toolCall",
      value: { callId, tool, inputJson: JSON.stringify(input) },
    });
  }
  decide(callId: string, decision: Decision, reason = ""): number {
    return this.add({ case: "policyDecision", value: { callId, decision, rule: "r", reason } });
  }
  ok(callId: string, output: unknown): number {
    return this.add({
      case: "toolResult",
      value: { callId, ok: true, outputJson: JSON.stringify(output) },
    });
  }
  fail(callId: string, code: string, message: string): number {
    return this.add({ case: "toolResult", value: { callId, ok: false, error: { code, message } } });
  }
  text(...chunks: string[]): void {
    for (const text of chunks) this.add({ case: "outputDelta", value: { text } });
  }
}

const TASK = "Fix the failing test in test/math.test.ts";
const PATCH = "--- a/src/math.ts\n+++ b/src/math.ts\n@@ -1 +1 @@\n-a - b\n+a + b\n";

/** The scenario shared by the tests below, through the denied approval (seq 28). */
function scenario(): Log {
  const log = new Log();
  log.add({
    case: "runQueued",
    value: { prompt: TASK, skills: ["fix-failing-test"], priority: 5 },
  });
  log.add({ case: "runStarted", value: { workerId: "w1", epoch: 1n } });
  log.text("I'll run the tests ", "first.");
  log.call("c1", "test.run", {}); // 5
  log.decide("c1", Decision.AUTO);
  log.add({ case: "toolOutput", value: { callId: "c1", chunk: "FAIL add\n" } });
  log.ok("c1", { exitCode: 1, stdout: "FAIL add: expected 3, got -1\n", stderr: "" }); // 8
  log.call("c2", "repo.read", { path: "src/math.ts" });
  log.decide("c2", Decision.AUTO);
  log.ok("c2", { path: "src/math.ts", content: "export const add = (a, b) => a - b;\n" }); // 11
  log.text("The bug is in add.");
  log.add({ case: "outputMessage", value: { role: "assistant", text: "The bug is in add." } });
  log.call("c3", "process.run", { command: "rm -rf test" }); // 14
  log.decide("c3", Decision.DENY, "rm is denied (risk.denyCommands)");
  log.fail("c3", "EPOLICY", "rm is denied (risk.denyCommands)"); // 16
  log.call("c4", "repo.patch", { path: "src/math.ts", unifiedDiff: PATCH }); // 17
  log.decide("c4", Decision.PREVIEW_APPROVAL);
  log.add({
    case: "approvalRequested",
    value: { approvalId: "apr1", callId: "c4", tool: "repo.patch" },
  });
  log.add({ case: "runPaused", value: { reason: "approval", approvalId: "apr1" } });
  log.add({
    case: "approvalResolved",
    value: { approvalId: "apr1", decision: ApprovalDecision.APPROVE, resolvedBy: "alice" },
  });
  log.add({ case: "runResumed", value: { workerId: "w2", epoch: 2n, approvalId: "apr1" } });
  log.ok("c4", { preview: { summary: "1 hunk" }, result: { path: "src/math.ts", changed: true } }); // 23
  log.call("c5", "repo.patch", {
    path: "test/math.test.ts",
    edits: [{ oldText: "3", newText: "-1" }],
  }); // 24
  log.decide("c5", Decision.PREVIEW_APPROVAL);
  log.add({
    case: "approvalRequested",
    value: { approvalId: "apr2", callId: "c5", tool: "repo.patch" },
  });
  log.add({ case: "runPaused", value: { reason: "approval", approvalId: "apr2" } });
  log.add({
    case: "approvalResolved",
    value: {
      approvalId: "apr2",
      decision: ApprovalDecision.DENY,
      reason: "do not weaken the test",
      resolvedBy: "alice",
    },
  }); // 28
  return log;
}

const DENIED = {
  code: "EAPPROVAL_DENIED",
  message: "a person denied this call: do not weaken the test",
};

const EXPECTED: ContextMessage[] = [
  { role: "user", text: TASK },
  {
    role: "assistant",
    text: "I'll run the tests first.",
    toolCalls: [{ callId: "c1", tool: "test.run", input: {} }],
  },
  {
    role: "tool",
    callId: "c1",
    tool: "test.run",
    output: { exitCode: 1, stdout: "FAIL add: expected 3, got -1\n", stderr: "" },
  },
  {
    role: "assistant",
    text: "",
    toolCalls: [{ callId: "c2", tool: "repo.read", input: { path: "src/math.ts" } }],
  },
  {
    role: "tool",
    callId: "c2",
    tool: "repo.read",
    output: { path: "src/math.ts", content: "export const add = (a, b) => a - b;\n" },
  },
  {
    role: "assistant",
    text: "The bug is in add.",
    toolCalls: [{ callId: "c3", tool: "process.run", input: { command: "rm -rf test" } }],
  },
  {
    role: "tool",
    callId: "c3",
    tool: "process.run",
    error: { code: "EPOLICY", message: "rm is denied (risk.denyCommands)" },
  },
  {
    role: "assistant",
    text: "",
    toolCalls: [
      { callId: "c4", tool: "repo.patch", input: { path: "src/math.ts", unifiedDiff: PATCH } },
    ],
  },
  {
    role: "tool",
    callId: "c4",
    tool: "repo.patch",
    output: { preview: { summary: "1 hunk" }, result: { path: "src/math.ts", changed: true } },
  },
  {
    role: "assistant",
    text: "",
    toolCalls: [
      {
        callId: "c5",
        tool: "repo.patch",
        input: { path: "test/math.test.ts", edits: [{ oldText: "3", newText: "-1" }] },
      },
    ],
  },
  { role: "tool", callId: "c5", tool: "repo.patch", error: DENIED },
];

const SKILL: Skill = {
  name: "fix-failing-test",
  description: "Fix it.",
  version: "1.0.0",
  triggers: [],
  body: "Reproduce first.",
  source: "test",
};

describe("assembleContext", () => {
  it("projects text, calls, a denial, an approval and a denied approval into exact messages", () => {
    const log = scenario();
    const ctx = assembleContext({
      events: log.events,
      systemPrompt: "You are agentd's coding agent.",
      skills: [SKILL],
      memory: { path: "AGENTS.md", content: "Run tests with npm test.\n" },
      budgetTokens: 100_000,
    });
    // The shape is the engine port's: the worker passes it on unchanged.
    const forEngine: EngineMessage[] = ctx.messages;
    assert.deepEqual(forEngine, EXPECTED);
    assert.equal(
      ctx.system,
      "You are agentd's coding agent.\n\n# Project memory (AGENTS.md)\n\nRun tests with npm test.\n\n" +
        "# Skills\n\nFollow these skills where they apply to the task.\n\n" +
        "## Skill: fix-failing-test (v1.0.0)\nFix it.\n\nReproduce first.\n\n",
    );
    // The denied call has no tool.result yet: the worker still has to append it.
    assert.deepEqual(ctx.pending, [
      {
        callId: "c5",
        tool: "repo.patch",
        input: { path: "test/math.test.ts", edits: [{ oldText: "3", newText: "-1" }] },
        seq: 24,
        started: false,
        approval: { approvalId: "apr2", state: "denied", reason: "do not weaken the test" },
      },
    ]);
    assert.equal(ctx.checkpointSeq, 0);
    assert.equal(ctx.lastSeq, 28);
    assert.equal(
      ctx.tokens,
      estimateTokens(ctx.system) + ctx.messages.reduce((n, m) => n + estimateMessageTokens(m), 0),
    );
    assert.equal(ctx.overBudget, false);

    // When the kernel's own result for the denial lands, the model's view does not change.
    log.fail("c5", DENIED.code, DENIED.message);
    const again = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 100_000 });
    assert.deepEqual(again.messages, EXPECTED);
    assert.deepEqual(again.pending, []);
  });

  it("leaves a call without a result to the worker, and shows its interrupted result later", () => {
    const log = scenario();
    log.fail("c5", DENIED.code, DENIED.message);
    log.text("Then I will fix the code only.");
    const c6 = log.call("c6", "test.run", { name: "add" });
    log.decide("c6", Decision.AUTO);
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 100_000 });
    assert.deepEqual(ctx.messages, [
      ...EXPECTED,
      { role: "assistant", text: "Then I will fix the code only." },
    ]);
    assert.deepEqual(ctx.pending, [
      { callId: "c6", tool: "test.run", input: { name: "add" }, seq: c6, started: false },
    ]);

    log.fail("c6", "interrupted", "the worker running this call stopped");
    const after = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 100_000 });
    assert.deepEqual(after.messages.slice(EXPECTED.length), [
      {
        role: "assistant",
        text: "Then I will fix the code only.",
        toolCalls: [{ callId: "c6", tool: "test.run", input: { name: "add" } }],
      },
      {
        role: "tool",
        callId: "c6",
        tool: "test.run",
        error: { code: "interrupted", message: "the worker running this call stopped" },
      },
    ]);
    assert.deepEqual(after.pending, []);
  });

  it("marks an open call whose tool.started is in the log, approved or not; the record adds no message", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.text("Appending. ");
    const c1 = log.call("c1", "process.run", { command: "echo x >> config.yaml" });
    log.decide("c1", Decision.PREVIEW_APPROVAL);
    log.add({
      case: "approvalRequested",
      value: { approvalId: "apr1", callId: "c1", tool: "process.run" },
    });
    log.add({ case: "runPaused", value: { reason: "approval", approvalId: "apr1" } });
    log.add({
      case: "approvalResolved",
      value: { approvalId: "apr1", decision: ApprovalDecision.APPROVE, resolvedBy: "alice" },
    });
    const approved = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1e5 });
    assert.equal(approved.pending[0]?.started, false, "approved, not started: it may run");
    log.add({ case: "toolStarted", value: { callId: "c1", workerId: "w1" } });
    log.add({ case: "toolOutput", value: { callId: "c1", chunk: "…" } });
    const started = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1e5 });
    assert.deepEqual(started.pending, [
      {
        callId: "c1",
        tool: "process.run",
        input: { command: "echo x >> config.yaml" },
        seq: c1,
        started: true,
        approval: { approvalId: "apr1", state: "approved", reason: "" },
      },
    ]);
    // A call without approval, started: the same.
    log.fail("c1", "interrupted", "stopped");
    log.call("c2", "repo.read", { path: "a" });
    log.decide("c2", Decision.AUTO);
    log.add({ case: "toolStarted", value: { callId: "c2" } });
    const read = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1e5 });
    assert.deepEqual(
      read.pending.map((p) => [p.callId, p.started, p.approval]),
      [["c2", true, undefined]],
    );
    // The starts add no message: each call is its text and call, then its result.
    log.ok("c2", { content: "a" });
    const done = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1e5 });
    assert.deepEqual(done.messages.slice(1, 3), [
      {
        role: "assistant",
        text: "Appending. ",
        toolCalls: [
          { callId: "c1", tool: "process.run", input: { command: "echo x >> config.yaml" } },
        ],
      },
      {
        role: "tool",
        callId: "c1",
        tool: "process.run",
        error: { code: "interrupted", message: "stopped" },
      },
    ]);
    assert.equal(done.messages.length, 5);
  });

  it("replaces the history through a checkpoint with its summary, keeping the task", () => {
    const log = scenario();
    log.add({
      case: "checkpointCreated",
      value: {
        summaryDigest: "d".repeat(64),
        throughSeq: 11n,
        summary: "Ran tests; read src/math.ts.",
      },
    });
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 100_000 });
    assert.equal(ctx.checkpointSeq, 11);
    assert.deepEqual(ctx.messages, [
      { role: "user", text: TASK },
      {
        role: "user",
        text: "[agentd] The earlier steps of this run (events 1-11) were compacted into this summary:\n\nRan tests; read src/math.ts.",
      },
      ...EXPECTED.slice(5),
    ]);
  });

  it("shows a result whose call a checkpoint covered together with its call", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("c1", "repo.patch", { path: "a", edits: [{ oldText: "x", newText: "y" }] });
    log.add({
      case: "approvalRequested",
      value: { approvalId: "apr1", callId: "c1", tool: "repo.patch" },
    });
    log.add({ case: "runPaused", value: { reason: "approval", approvalId: "apr1" } });
    // Compacted while the call waited: the call is covered, its result is not.
    log.add({
      case: "checkpointCreated",
      value: { summaryDigest: "d".repeat(64), throughSeq: 4n, summary: "S" },
    });
    const waiting = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1000 });
    assert.equal(waiting.messages.length, 2);
    assert.deepEqual(waiting.pending[0]?.approval, {
      approvalId: "apr1",
      state: "awaiting",
      reason: "",
    });
    log.add({
      case: "approvalResolved",
      value: { approvalId: "apr1", decision: ApprovalDecision.APPROVE, resolvedBy: "bob" },
    });
    assert.deepEqual(
      assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1000 }).pending[0]
        ?.approval,
      { approvalId: "apr1", state: "approved", reason: "" },
    );
    log.ok("c1", { path: "a", changed: true });
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1000 });
    assert.deepEqual(ctx.messages.slice(2), [
      {
        role: "assistant",
        text: "",
        toolCalls: [
          {
            callId: "c1",
            tool: "repo.patch",
            input: { path: "a", edits: [{ oldText: "x", newText: "y" }] },
          },
        ],
      },
      { role: "tool", callId: "c1", tool: "repo.patch", output: { path: "a", changed: true } },
    ]);
    assert.deepEqual(ctx.pending, []);
  });

  it("joins deltas per turn, keeps a differing final message, and notes system messages", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.text("Hel", "lo");
    log.add({ case: "outputMessage", value: { role: "assistant", text: "Hello!" } }); // replaces
    log.text("Next ", "turn");
    log.add({ case: "runResumed", value: { workerId: "w" } }); // a turn boundary
    log.add({ case: "outputMessage", value: { role: "system", text: "the approval expired" } });
    log.add({ case: "outputMessage", value: { role: "assistant", text: "Done." } });
    // A step's complete message appended after its tool calls repeats nothing.
    log.text("Let me ", "look.");
    log.call("c1", "repo.read", { path: "a" });
    log.ok("c1", { content: "" });
    log.add({ case: "outputMessage", value: { role: "assistant", text: "Let me look." } });
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1000 });
    assert.deepEqual(ctx.messages, [
      { role: "user", text: "t" },
      { role: "assistant", text: "Hello!" },
      { role: "assistant", text: "Next turn" },
      { role: "user", text: "[agentd] the approval expired" },
      { role: "assistant", text: "Done." },
      {
        role: "assistant",
        text: "Let me look.",
        toolCalls: [{ callId: "c1", tool: "repo.read", input: { path: "a" } }],
      },
      { role: "tool", callId: "c1", tool: "repo.read", output: { content: "" } },
    ]);
  });

  it("sandbox.lost becomes a notice after the calls it names: re-applied ones, and each lost call with its input", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("c1", "repo.patch", { path: "a.txt", edits: [{ oldText: "a", newText: "b" }] });
    log.ok("c1", {});
    log.call("c2", "process.run", { command: "echo made > made.txt" });
    log.ok("c2", { exitCode: 0 });
    log.add({
      case: "sandboxLost",
      value: {
        reason: "killed",
        lostCallIds: ["c2"],
        reappliedCallIds: ["c1"],
        restoredFromSeq: 0n,
      },
    });
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 10_000 });
    const last = ctx.messages.at(-1);
    assert.equal(last?.role, "user");
    const text = last?.role === "user" ? last.text : "";
    assert.match(text, /^\[agentd\] Your sandbox container was lost \(killed\)/);
    assert.match(text, /restored from the uploaded workspace/);
    assert.match(text, /Re-applied exactly as recorded: c1\./);
    assert.match(text, /GONE[\s\S]*- c2 process\.run \{"command":"echo made > made\.txt"\}/);
    assert.doesNotMatch(text, /- c1 /, "a re-applied call is not listed as gone");
    // Nothing lost: the model is still told its container was replaced.
    log.add({ case: "sandboxLost", value: { reason: "again", restoredFromSeq: 7n } });
    const again = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 10_000 });
    const notice = again.messages.at(-1);
    assert.match(
      notice?.role === "user" ? notice.text : "",
      /snapshot \(event 7\)[\s\S]*No recorded change of the workspace was lost/,
    );
  });

  it("usage.updated between a step's text and its calls keeps them one message", () => {
    // The order a step is recorded in: deltas, usage.updated, output.message, the calls.
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.text("Running ", "the tests.");
    log.add({ case: "usageUpdated", value: { usage: { inputTokens: 10n, outputTokens: 3n } } });
    log.add({ case: "outputMessage", value: { role: "assistant", text: "Running the tests." } });
    log.call("c1", "test.run", {});
    log.ok("c1", { exitCode: 1 });
    const ctx = assembleContext({ events: log.events, systemPrompt: "x", budgetTokens: 1000 });
    assert.deepEqual(ctx.messages, [
      { role: "user", text: "t" },
      {
        role: "assistant",
        text: "Running the tests.",
        toolCalls: [{ callId: "c1", tool: "test.run", input: {} }],
      },
      { role: "tool", callId: "c1", tool: "test.run", output: { exitCode: 1 } },
    ]);
  });

  it("cuts a huge tool output in the context, keeping its structure", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("c1", "process.run", { command: "cat big.log" });
    log.ok("c1", { exitCode: 0, stdout: `${"a".repeat(50_000)}END`, stderr: "" });
    const ctx = assembleContext({
      events: log.events,
      systemPrompt: "x",
      budgetTokens: 100_000,
      maxToolOutputBytes: 4096,
    });
    const out = (ctx.messages[2] as { output: { exitCode: number; stdout: string } }).output;
    assert.equal(out.exitCode, 0);
    assert.match(out.stdout, /^a+\n\[… \d+ bytes cut by agentd …\]\na*END$/);
    assert.ok(Buffer.byteLength(JSON.stringify(out)) <= 4096);
    assert.deepEqual(capJson({ n: 1 }, 10), { n: 1 });
  });

  it("shows a test.run's parsed results first, as text, and its output after within the cap", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("c1", "test.run", {});
    const tests = {
      passed: 14,
      failed: 1,
      skipped: 0,
      errors: 0,
      format: "pytest",
      failures: [
        {
          name: "t.py::test_a",
          file: "t.py",
          line: 3,
          message: "AssertionError: 1 != 2\nassert 1 == 2",
        },
      ],
      moreFailures: 0,
    };
    log.add({
      case: "toolResult",
      value: {
        callId: "c1",
        ok: true,
        exitCode: 1,
        outputJson: JSON.stringify({ exitCode: 1, stdout: "x".repeat(50_000), tests }),
        tests,
      },
    });
    const ctx = assembleContext({
      events: log.events,
      systemPrompt: "x",
      budgetTokens: 100_000,
      maxToolOutputBytes: 4096,
    });
    const out = (ctx.messages[2] as { output: Record<string, unknown> }).output;
    assert.equal(Object.keys(out)[0], "testResults", "the summary comes first");
    assert.equal(
      out.testResults,
      "Test results (pytest): 1 failed, 14 passed\nFAILED t.py::test_a at t.py:3\n    AssertionError: 1 != 2\n    assert 1 == 2",
    );
    assert.equal(out.tests, undefined, "said once");
    assert.equal(out.exitCode, 1);
    assert.ok(Buffer.byteLength(JSON.stringify(out)) <= 4096 + 64);
  });
});

describe("compactContext", () => {
  let dir: string;
  let artifacts: FsArtifactStore;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "agentd-compactor-"));
    artifacts = new FsArtifactStore(dir);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A long run: the scenario, then many large reads, another patch and a failing test run. */
  function longRun(): Log {
    const log = scenario();
    log.fail("c5", DENIED.code, DENIED.message);
    for (let i = 0; i < 40; i++) {
      log.text(`Reading module ${i}.`);
      log.call(`r${i}`, "repo.read", { path: `src/mod${i}.ts` });
      log.decide(`r${i}`, Decision.AUTO);
      log.ok(`r${i}`, { path: `src/mod${i}.ts`, content: `// module ${i}\n${"x".repeat(2000)}\n` });
    }
    log.call("p2", "repo.patch", { path: "src/util.ts", edits: [{ oldText: "a", newText: "b" }] });
    log.ok("p2", { path: "src/util.ts", changed: true });
    log.call("t2", "test.run", {});
    log.ok("t2", { exitCode: 1, stdout: "", stderr: "TypeError: util is not a function" });
    log.text("Still failing; checking util.");
    return log;
  }
  const base = { systemPrompt: "You are agentd's coding agent.", budgetTokens: 8000 };

  it("a test.run's parsed results make its step and its detail in the summary", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("t1", "test.run", {});
    log.add({
      case: "toolResult",
      value: {
        callId: "t1",
        ok: true,
        exitCode: 1,
        outputJson: JSON.stringify({ exitCode: 1, stdout: "noise ".repeat(500), stderr: "" }),
        tests: {
          passed: 3,
          failed: 1,
          failures: [{ name: "TestAdd", file: "calc_test.go", line: 9, message: "got 3\nwant 4" }],
        },
      },
    });
    const summary = renderSummary(extractFacts(log.events), 8000);
    assert.match(
      summary,
      /test\.run \(all tests\) -> exit 1, tests: 1 failed, 3 passed\n {2}TestAdd \(calc_test\.go:9\): got 3/,
    );
    assert.doesNotMatch(summary, /noise/);
  });

  it("a call a sandbox.lost lists is summarised as lost, not as done", () => {
    const log = new Log();
    log.add({ case: "runQueued", value: { prompt: "t" } });
    log.call("c2", "process.run", { command: "echo made > made.txt" });
    log.ok("c2", { exitCode: 0 });
    log.add({ case: "sandboxLost", value: { reason: "killed", lostCallIds: ["c2", "ghost"] } });
    const summary = renderSummary(extractFacts(log.events), 8000);
    assert.match(summary, /\(1 failed\)/);
    assert.match(
      summary,
      /echo made > made\.txt.*LOST with its sandbox \(sandbox\.lost at event 4\)/,
    );
  });

  it("does nothing within the budget", async () => {
    assert.equal(
      await compactContext({ ...base, events: scenario().events, artifacts }),
      undefined,
    );
  });

  it("summarises the oldest history into a checkpoint that brings the next assembly under budget", async () => {
    const log = longRun();
    const before = assembleContext({ ...base, events: log.events });
    assert.equal(before.overBudget, true);

    const c = await compactContext({ ...base, events: log.events, artifacts });
    assert.ok(c !== undefined);
    assert.equal(c.payload.case, "checkpointCreated");
    const cp = c.payload.value;
    assert.equal(Number(cp.throughSeq), c.throughSeq);
    assert.ok(c.throughSeq > 0 && c.throughSeq < log.events.length);
    // The summary mentions the task, the files changed, the denial and the last error.
    assert.ok(cp.summary.startsWith(`Task: ${TASK}\n`));
    assert.match(cp.summary, /Files changed: src\/math\.ts/);
    assert.match(cp.summary, /EAPPROVAL_DENIED: a person denied this call: do not weaken the test/);
    assert.match(cp.summary, /EPOLICY: rm is denied/);
    assert.ok(Buffer.byteLength(cp.summary) <= MAX_CHECKPOINT_SUMMARY_BYTES);
    assert.ok(Buffer.byteLength(cp.summary) <= base.budgetTokens); // a quarter of the budget
    // The artifact holds the whole summary, addressed by its sha256.
    const chunks: Uint8Array[] = [];
    for await (const ch of artifacts.read(cp.summaryDigest)) chunks.push(ch);
    const full = Buffer.concat(chunks);
    assert.equal(createHash("sha256").update(full).digest("hex"), cp.summaryDigest);
    assert.equal(c.artifact.digest, cp.summaryDigest);
    assert.ok(full.toString("utf8").startsWith(`Task: ${TASK}\n`));

    // The worker appends it; the next assembly fits and never splits a call from its result.
    log.add(c.payload);
    const next = assembleContext({ ...base, events: log.events });
    assert.equal(next.overBudget, false, `${next.tokens} tokens`);
    assert.equal(next.checkpointSeq, c.throughSeq);
    assert.deepEqual(next.messages[0], { role: "user", text: TASK });
    assert.match((next.messages[1] as { text: string }).text, /^\[agentd\] The earlier steps/);
    next.messages.forEach((m, i) => {
      if (m.role === "assistant" && m.toolCalls !== undefined)
        assert.equal((next.messages[i + 1] as { callId?: string }).callId, m.toolCalls[0]?.callId);
      if (m.role === "tool")
        assert.equal((next.messages[i - 1] as { role: string }).role, "assistant");
    });
    // The newest history is kept verbatim.
    assert.deepEqual(next.messages.at(-1), {
      role: "assistant",
      text: "Still failing; checking util.",
    });

    // A second compaction later covers everything up to its cut, the first one's part included.
    for (let i = 40; i < 70; i++) {
      log.call(`r${i}`, "repo.read", { path: `src/mod${i}.ts` });
      log.ok(`r${i}`, { path: `src/mod${i}.ts`, content: "y".repeat(2000) });
    }
    assert.equal(assembleContext({ ...base, events: log.events }).overBudget, true);
    const c2 = await compactContext({ ...base, events: log.events, artifacts });
    assert.ok(c2 !== undefined && c2.throughSeq > c.throughSeq);
    assert.match(c2.payload.value.summary, /Files changed: src\/math\.ts, src\/util\.ts/);
    assert.match(c2.payload.value.summary, /TypeError: util is not a function/);
    log.add(c2.payload);
    assert.equal(assembleContext({ ...base, events: log.events }).overBudget, false);
  });

  it("uses a model-made summary through the summarize seam", async () => {
    const log = longRun();
    let seen = "";
    const c = await compactContext({
      ...base,
      events: log.events,
      artifacts,
      summarize: async (t) => {
        seen = t;
        return "MODEL SUMMARY";
      },
    });
    assert.ok(c !== undefined);
    assert.ok(seen.startsWith(`TASK: ${TASK}\n`));
    assert.match(seen, /CALL process\.run \{"command":"rm -rf test"\}/);
    assert.match(seen, /RESULT process\.run failed EPOLICY: rm is denied/);
    assert.equal(c.payload.value.summary, "MODEL SUMMARY");
    assert.equal(
      c.payload.value.summaryDigest,
      createHash("sha256").update("MODEL SUMMARY").digest("hex"),
    );
  });
});
