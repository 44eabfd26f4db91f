/**
 * The renderer: the same events give the same lines (live or replayed), plain output has no
 * escape codes, the status line appears only on a terminal, quiet mode keeps what needs
 * attention; plus the one-line event format and the approval answers.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  ApprovalDecision,
  Decision,
  type Event,
  EventSchema,
  OutputStream,
} from "../gen/agentd/v1/events_pb.js";
import { describeCall, eventLine, Renderer } from "./render.ts";
import { makeStyle, stripAnsi } from "./style.ts";
import { guardText } from "./terminal-out.ts";
import { outcomeCode, parseAnswer } from "./watch.ts";

const RUN = "01JRUN00000000000000000000";
const APR = `apr_${RUN}_01JAPR00000000000000000000`;
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

type Payload = MessageInitShape<typeof EventSchema>["payload"];

function story(): Event[] {
  const payloads: [string, Payload][] = [
    [
      "run.queued",
      {
        case: "runQueued",
        value: {
          prompt: "fix the test",
          priority: 5,
          workspaceDigest: "ab".repeat(32),
          workspaceSizeBytes: 2048n,
        },
      },
    ],
    [
      "run.started",
      {
        case: "runStarted",
        value: {
          workerId: "w1",
          image: "agentd-sandbox-go:latest",
          imageReason: "detected go from go.mod (test command: go)",
          ecosystem: "go",
        },
      },
    ],
    ["output.delta", { case: "outputDelta", value: { text: "Let me " } }],
    ["output.delta", { case: "outputDelta", value: { text: "look." } }],
    [
      "output.message",
      { case: "outputMessage", value: { role: "assistant", text: "Let me look." } },
    ],
    [
      "tool.call",
      {
        case: "toolCall",
        value: { callId: "c1", tool: "process.run", inputJson: '{"command":"npm test"}' },
      },
    ],
    [
      "policy.decision",
      {
        case: "policyDecision",
        value: { callId: "c1", decision: Decision.PREVIEW_AUTO, rule: "r1" },
      },
    ],
    // The execution's start: for a worker taking over, nothing for a person.
    ["tool.started", { case: "toolStarted", value: { callId: "c1", workerId: "w1" } }],
    [
      "tool.output",
      {
        case: "toolOutput",
        value: { callId: "c1", stream: OutputStream.STDOUT, chunk: "line one\nline " },
      },
    ],
    [
      "tool.output",
      { case: "toolOutput", value: { callId: "c1", stream: OutputStream.STDOUT, chunk: "two\n" } },
    ],
    [
      "tool.output",
      { case: "toolOutput", value: { callId: "c1", stream: OutputStream.STDERR, chunk: "warn" } },
    ],
    [
      "tool.result",
      { case: "toolResult", value: { callId: "c1", ok: true, exitCode: 1, durationMs: 1500n } },
    ],
    [
      "tool.call",
      {
        case: "toolCall",
        value: {
          callId: "c2",
          tool: "repo.patch",
          inputJson: '{"path":"a.ts","edits":[{"oldText":"a","newText":"b"}]}',
        },
      },
    ],
    [
      "policy.decision",
      {
        case: "policyDecision",
        value: {
          callId: "c2",
          decision: Decision.PREVIEW_APPROVAL,
          rule: "risk.approvalWhen.touchesConfig",
          reason: "touches config",
        },
      },
    ],
    [
      "approval.requested",
      {
        case: "approvalRequested",
        value: {
          approvalId: APR,
          callId: "c2",
          tool: "repo.patch",
          preview: {
            summary: "patch a.ts",
            files: ["a.ts"],
            hunks: 1,
            linesAdded: 1,
            linesRemoved: 1,
            diff: "--- a/a.ts\n+++ b/a.ts\n@@ -1 +1 @@\n-a\n+b\n",
          },
        },
      },
    ],
    ["run.paused", { case: "runPaused", value: { reason: "approval", approvalId: APR } }],
    [
      "approval.resolved",
      {
        case: "approvalResolved",
        value: {
          approvalId: APR,
          decision: ApprovalDecision.APPROVE,
          resolvedBy: "alice",
          reason: "ok",
        },
      },
    ],
    ["run.resumed", { case: "runResumed", value: { workerId: "w2" } }],
    ["tool.started", { case: "toolStarted", value: { callId: "c2", workerId: "w2" } }],
    ["tool.result", { case: "toolResult", value: { callId: "c2", ok: true, durationMs: 12n } }],
    [
      "tool.call",
      {
        case: "toolCall",
        value: { callId: "c3", tool: "process.run", inputJson: '{"command":"rm -rf /"}' },
      },
    ],
    [
      "policy.decision",
      {
        case: "policyDecision",
        value: {
          callId: "c3",
          decision: Decision.DENY,
          rule: "risk.denyCommandPatterns[0]",
          reason: "recursive removal of /",
        },
      },
    ],
    [
      "tool.result",
      {
        case: "toolResult",
        value: {
          callId: "c3",
          ok: false,
          error: { code: "EPOLICY", message: "recursive removal of /" },
        },
      },
    ],
    [
      "artifact.emitted",
      {
        case: "artifactEmitted",
        value: { name: "patch", digest: "cd".repeat(32), sizeBytes: 120n },
      },
    ],
    [
      "run.completed",
      {
        case: "runCompleted",
        value: {
          summary: "Fixed it.",
          usage: { inputTokens: 1200n, outputTokens: 80n },
          costMicros: 1500n,
        },
      },
    ],
  ];
  return payloads.map(([type, payload], i) =>
    create(EventSchema, {
      runId: RUN,
      seq: BigInt(i + 1),
      type,
      ts: timestampFromMs(T0 + i * 1000),
      payload,
    }),
  );
}

function render(
  events: Event[],
  opts: { color?: boolean; live?: boolean; quiet?: boolean } = {},
): string {
  let out = "";
  const color = opts.color ?? false;
  const r = new Renderer({
    // As agentctl's TerminalOut writes it: text guarded (colors made SGR), control as it is.
    out: { write: (s: string) => (out += guardText(s, color)), control: (s) => (out += s) },
    color: opts.color ?? false,
    live: opts.live ?? false,
    quiet: opts.quiet ?? false,
    columns: () => 100,
  });
  for (const ev of events) r.event(ev);
  r.close();
  return out;
}

describe("Renderer", () => {
  it("tells the story of a run in plain lines", () => {
    const out = render(story());
    assert.equal(out, render(story()), "deterministic");
    assert.ok(!out.includes("\x1b"), "no escape codes off a terminal");
    const want = [
      `● run ${RUN} queued · priority 5 · workspace 2.0 KiB`,
      "  fix the test",
      "▶ started on w1 · agentd-sandbox-go:latest (detected go from go.mod (test command: go))",
      "  ▎ Let me look.",
      "→ process.run $ npm test",
      "  policy: preview, then run (r1)",
      "  │ line one",
      "  │ line two",
      "  ┊ warn",
      "  ✗ process.run exit 1 1.5 s",
      "→ repo.patch a.ts (1 edit)",
      "  policy: needs approval (risk.approvalWhen.touchesConfig): touches config",
      `  ┌ approval needed ${APR} · repo.patch`,
      "  │ patch a.ts",
      "  │ files: a.ts  +1 -1 in 1 hunk",
      "  │ --- a/a.ts",
      "  │ +++ b/a.ts",
      "  │ @@ -1 +1 @@",
      "  │ -a",
      "  │ +b",
      "  └",
      `⏸ paused: waiting for approval ${APR}`,
      `  ✔ approved ${APR} by alice: ok`,
      "▶ resumed on w2",
      "  ✓ repo.patch 12 ms",
      "→ process.run $ rm -rf /",
      "  ⛔ denied by policy (risk.denyCommandPatterns[0]): recursive removal of /",
      "  ✗ process.run: EPOLICY recursive removal of /",
      `◆ artifact patch 120 B · sha256 cdcdcdcdcdcd · agentctl artifact get ${RUN} --out fix.patch`,
      "✔ completed in 24.0 s · 1,200 tokens in, 80 out · $0.0015",
      "  Fixed it.",
      "",
    ].join("\n");
    assert.equal(out, want);
  });

  it("colors on a terminal, with a status line that is erased before every line", () => {
    const out = render(story().slice(0, 3), { color: true, live: true });
    assert.ok(out.includes("\x1b[32m▶"), "colored");
    // The status line is drawn as CLEAR + text and erased by the next CLEAR.
    const CLEAR = "\r\x1b[2K";
    const parts = out.split(CLEAR);
    const statuses = parts.slice(1).filter((p) => !p.includes("\n"));
    assert.ok(
      statuses.some((p) => /running|thinking|writing|queued/.test(p)),
      "a status line",
    );
    assert.equal(
      stripAnsi(parts.filter((p, i) => i === 0 || p.includes("\n")).join("")),
      render(story().slice(0, 3)),
      "without the status line, the same text",
    );
  });

  it("quiet mode keeps approvals, artifacts and the outcome", () => {
    const out = render(story(), { quiet: true });
    assert.doesNotMatch(out, /→ process\.run|line one|Let me look/);
    assert.match(out, /approval needed/);
    assert.match(out, /\+b/);
    assert.match(out, /◆ artifact patch/);
    assert.match(out, /✔ completed.*\n {2}Fixed it\./);
  });
});

describe("what a person reads", () => {
  const ev = (type: string, payload: Payload, i: number) =>
    create(EventSchema, {
      runId: RUN,
      seq: BigInt(i + 1),
      type,
      ts: timestampFromMs(T0 + i),
      payload,
    });

  it("a model message streamed, then usage.updated, then output.message: shown once, no bare event type", () => {
    const events = [
      ev("output.delta", { case: "outputDelta", value: { text: "The bug is " } }, 0),
      ev("output.delta", { case: "outputDelta", value: { text: "in max()." } }, 1),
      // What the worker writes after every model step, before the step's message.
      ev(
        "usage.updated",
        {
          case: "usageUpdated",
          value: { usage: { inputTokens: 10n, outputTokens: 4n }, costMicros: 1n, steps: 1 },
        },
        2,
      ),
      ev(
        "output.message",
        { case: "outputMessage", value: { role: "assistant", text: "The bug is in max()." } },
        3,
      ),
      ev("output.delta", { case: "outputDelta", value: { text: "Fixed." } }, 4),
      ev("usage.updated", { case: "usageUpdated", value: { steps: 2 } }, 5),
      ev(
        "output.message",
        { case: "outputMessage", value: { role: "assistant", text: "Fixed." } },
        6,
      ),
    ];
    for (const live of [false, true]) {
      const out = stripAnsi(render(events, { live }));
      assert.equal(out.split("The bug is in max().").length - 1, 1, `once (live=${live}): ${out}`);
      assert.equal(out.split("Fixed.").length - 1, 1, `once (live=${live}): ${out}`);
      assert.doesNotMatch(out, /usage\.updated|\(\w+\.\w+\)/);
    }
    assert.equal(render(events), "  ▎ The bug is in max().\n  ▎ Fixed.\n");
  });

  it("sandbox.lost is shown even in quiet mode: what was restored, each lost call by tool and input, the run's end", () => {
    const events = [
      ev(
        "tool.call",
        {
          case: "toolCall",
          value: {
            callId: "c2",
            tool: "process.run",
            inputJson: '{"command":"echo made > made.txt"}',
          },
        },
        0,
      ),
      ev(
        "sandbox.lost",
        {
          case: "sandboxLost",
          value: {
            reason: "the run's container was gone",
            lostCallIds: ["c2"],
            reappliedCallIds: ["c1"],
            restoredFromSeq: 0n,
            failsRun: true,
          },
        },
        1,
      ),
    ];
    for (const quiet of [false, true]) {
      const out = stripAnsi(render(events, { quiet }));
      assert.match(out, /⚠ sandbox lost: the run's container was gone/);
      assert.match(out, /workspace restored from the upload; re-applied c1/);
      assert.match(out, /✗ lost c2 process\.run \$ echo made > made\.txt: its effects are gone/);
      assert.match(out, /the run fails \(policy sandbox\.onLost: fail\)/);
    }
    const line = eventLine(events[1] as Event, makeStyle(false));
    assert.match(
      line,
      /sandbox\.lost +restored from upload; re-applied \[c1\]; LOST \[c2\]; fails the run/,
    );
  });

  it("a message not streamed is printed; caches, network requests and image pulls say what happened", () => {
    const events = [
      ev(
        "output.message",
        { case: "outputMessage", value: { role: "assistant", text: "Plain." } },
        0,
      ),
      ev(
        "cache.restored",
        {
          case: "cacheRestored",
          value: {
            ecosystem: "node",
            lockfile: "package-lock.json",
            reason: "exact",
            sizeBytes: 2048n,
            savedByRun: "01JOTHER",
          },
        },
        1,
      ),
      ev(
        "network.request",
        {
          case: "networkRequest",
          value: {
            method: "CONNECT",
            host: "registry.npmjs.org",
            port: 443,
            decision: "denied",
            reason: "not in the allowlist",
          },
        },
        2,
      ),
      ev(
        "image.pull",
        {
          case: "imagePull",
          value: { image: "node:24", phase: "progress", bytesDone: 1n, bytesTotal: 2n },
        },
        3,
      ),
      ev(
        "image.pull",
        {
          case: "imagePull",
          value: {
            image: "node:24",
            phase: "failed",
            reason: "not_found",
            message: "manifest unknown",
          },
        },
        4,
      ),
    ];
    assert.equal(
      render(events),
      [
        "  ▎ Plain.",
        "  ◇ node cache restored for package-lock.json (exact) 2.0 KiB, saved by 01JOTHER",
        "  ⇄ CONNECT registry.npmjs.org:443 denied (not in the allowlist)",
        "  ✗ pulling node:24 failed: not_found: manifest unknown",
        "",
      ].join("\n"),
    );
  });
});

describe("test results", () => {
  const ev = (seq: number, type: string, payload: Payload): Event =>
    create(EventSchema, {
      runId: RUN,
      seq: BigInt(seq),
      type,
      ts: timestampFromMs(T0 + seq),
      payload,
    });
  const call: Event = ev(1, "tool.call", {
    case: "toolCall",
    value: { callId: "t1", tool: "test.run", inputJson: "{}" },
  });
  const failing = {
    passed: 14,
    failed: 2,
    skipped: 1,
    errors: 0,
    format: "pytest",
    failures: [
      {
        name: "tests/test_a.py::test_add",
        file: "tests/test_a.py",
        line: 12,
        message: "AssertionError: 4 != 5\nmore",
      },
      { name: "evil\x1b[2J\x07name", file: "x\x00.py", line: 0, message: "" },
    ],
    moreFailures: 3,
  };

  it("a failing test.run: red counts with the exit, then its failures, escaped", () => {
    const out = render([
      call,
      ev(2, "tool.result", {
        case: "toolResult",
        value: { callId: "t1", ok: true, exitCode: 1, durationMs: 900n, tests: failing },
      }),
    ]);
    assert.equal(
      out,
      [
        "→ test.run all tests",
        "  ✗ test.run  2 failed, 14 passed, 1 skipped (exit 1) 900 ms",
        "      ✗ tests/test_a.py::test_add (tests/test_a.py:12): AssertionError: 4 != 5",
        "      ✗ evil\\x1b[2J\\x07name (x\\x00.py)",
        "      … 3 more failures",
        "",
      ].join("\n"),
    );
    const colored = render(
      [
        call,
        ev(2, "tool.result", {
          case: "toolResult",
          value: { callId: "t1", ok: true, exitCode: 1, tests: failing },
        }),
      ],
      { color: true },
    );
    assert.ok(colored.includes("\x1b[31m2 failed, 14 passed, 1 skipped"), "red");
  });

  it("a passing test.run is green; any non-zero exit is a failure", () => {
    const pass = { ...failing, failed: 0, failures: [], moreFailures: 0 };
    const out = render([
      call,
      ev(2, "tool.result", { case: "toolResult", value: { callId: "t1", ok: true, tests: pass } }),
    ]);
    assert.match(out, /^ {2}✓ test\.run {2}14 passed, 1 skipped$/m);
    const exit = render([
      call,
      ev(2, "tool.result", {
        case: "toolResult",
        value: { callId: "t1", ok: true, exitCode: 2, tests: pass },
      }),
    ]);
    assert.match(exit, /^ {2}✗ test\.run {2}14 passed, 1 skipped \(exit 2\)$/m);
    const notFound = render([
      call,
      ev(2, "tool.result", {
        case: "toolResult",
        value: {
          callId: "t1",
          ok: false,
          error: { code: "ENOTFOUND", message: "go: command not found … agentd-sandbox-go:latest" },
        },
      }),
    ]);
    assert.match(notFound, /✗ test\.run: ENOTFOUND go: command not found/);
    const line = eventLine(
      ev(2, "tool.result", {
        case: "toolResult",
        value: { callId: "t1", ok: true, exitCode: 1, durationMs: 5n, tests: failing },
      }),
      makeStyle(false),
    );
    assert.match(line, /tool\.result +t1 failed exit 1 tests: 2 failed, 14 passed, 1 skipped 5ms$/);
  });
});

describe("workspace text in one-line fields", () => {
  it("carries no terminal escape or control character to the terminal (a test file's name in run.started's reason, a prompt)", () => {
    const ev = (seq: number, type: string, payload: Payload): Event =>
      create(EventSchema, {
        runId: RUN,
        seq: BigInt(seq),
        type,
        ts: timestampFromMs(T0 + seq * 1000),
        payload,
      });
    const hostile = "tests/test_\x1b]0;owned\x07\x1b[2J\x9b31m\rx.py";
    const events = [
      ev(1, "run.queued", {
        case: "runQueued",
        value: { prompt: `fix ${hostile}`, priority: 5 },
      }),
      ev(2, "run.started", {
        case: "runStarted",
        value: {
          workerId: "w1",
          image: "agentd-sandbox-python:latest",
          imageReason: `detected python from Python test files (${hostile})`,
          ecosystem: "python",
        },
      }),
    ];
    for (const out of [
      render(events),
      render(events, { color: true }),
      ...events.map((e) => eventLine(e, makeStyle(false))),
    ]) {
      // The renderer's own colours are SGR sequences (ESC [ … m): nothing else may remain.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ESC starts them
      const text = out.replace(/\x1b\[[0-9;]*m/g, "");
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it checks
      assert.doesNotMatch(text, /[\x00-\x09\x0b-\x1f\x7f-\x9f]/, JSON.stringify(out));
      assert.match(text, /tests\/test_.*x\.py/);
    }
  });
});

describe("helpers", () => {
  it("one line per event", () => {
    const lines = story().map((e) => eventLine(e, makeStyle(false)));
    assert.equal(
      lines[0],
      `    1  12:00:00.000  run.queued           prompt="fix the test" priority=5 workspace=2.0 KiB`,
    );
    assert.equal(
      lines[1],
      `    2  12:00:01.000  run.started          worker=w1 epoch=0 image=agentd-sandbox-go:latest (detected go from go.mod (test command: go))`,
    );
    assert.match(lines[5] as string, /^ {4}6 .* tool\.call {12}c1 process\.run \$ npm test$/);
    assert.match(lines[7] as string, /^ {4}8 .* tool\.started {9}c1 on w1$/);
  });

  it("cache.restored and cache.saved name the lockfile, the archive and its saver", () => {
    const ev = (type: string, payload: Payload) =>
      create(EventSchema, { runId: RUN, seq: 3n, type, ts: timestampFromMs(T0), payload });
    const restored = eventLine(
      ev("cache.restored", {
        case: "cacheRestored",
        value: {
          ecosystem: "npm",
          lockfile: "package-lock.json",
          reason: "setup",
          digest: "cd".repeat(32),
          sizeBytes: 2048n,
          savedByRun: "01JSAVER",
        },
      }),
      makeStyle(false),
    );
    assert.match(
      restored,
      /cache\.restored +npm package-lock\.json \(setup\) sha256:cdcdcdcdcdcd 2\.0 KiB, saved by 01JSAVER$/,
    );
    const saved = eventLine(
      ev("cache.saved", {
        case: "cacheSaved",
        value: {
          ecosystem: "go",
          lockfile: "go.sum",
          digest: "ef".repeat(32),
          sizeBytes: 1024n,
          evicted: ["a", "b"],
        },
      }),
      makeStyle(false),
    );
    assert.match(saved, /cache\.saved +go go\.sum sha256:efefefefefef 1\.0 KiB, 2 evicted$/);
  });

  it("describes calls per tool", () => {
    assert.equal(
      describeCall("repo.read", '{"path":"a.ts","range":{"start":3,"end":9}}'),
      "a.ts:3-9",
    );
    assert.equal(describeCall("repo.search", '{"query":"foo"}'), '"foo"');
    assert.equal(describeCall("process.run", '{"command":"ls","cwd":"src"}'), "$ ls  (in src)");
    assert.equal(describeCall("test.run", "{}"), "all tests");
    assert.equal(describeCall("x.y", "not json"), "not json");
  });

  it("reads approval answers and outcomes", () => {
    assert.deepEqual(parseAnswer("y"), { approve: true, reason: "" });
    assert.deepEqual(parseAnswer(" YES "), { approve: true, reason: "" });
    assert.deepEqual(parseAnswer(""), { approve: false, reason: "" });
    assert.deepEqual(parseAnswer("n"), { approve: false, reason: "" });
    assert.deepEqual(parseAnswer("use edits instead"), {
      approve: false,
      reason: "use edits instead",
    });
    const ev = (type: string) => create(EventSchema, { type });
    assert.equal(outcomeCode(ev("run.completed")), 0);
    assert.equal(outcomeCode(ev("run.failed")), 1);
    assert.equal(outcomeCode(ev("run.cancelled")), 2);
    assert.equal(outcomeCode(ev("run.paused")), 3);
  });
});
