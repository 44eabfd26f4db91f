/**
 * The replay engine: steps played in order with their text deltas, calls and usage; the
 * step chosen from the request's messages alone (a resumed run continues where it was);
 * a conversation that left the transcript ends with a clear text and a finish; aborts;
 * transcript validation; and the bundled example transcript is valid and complete.
 * Then the wiring in the real `bin/agentd` (which model it picks, and says it picked).
 * The whole demo scenario on Docker is `node bench/e2e.ts` (and `make demo`).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { isAgentdError } from "../errors.ts";
import { AGENTD_BIN, startAgentd } from "../testing/agentd-process.ts";
import type { EngineEvent, EngineMessage, EngineRequest } from "./port.ts";
import {
  createReplayEngine,
  loadTranscript,
  parseTranscript,
  type ReplayTranscript,
  replayCallId,
  splitDeltas,
} from "./replay-engine.ts";

const transcript: ReplayTranscript = parseTranscript({
  version: 1,
  model: "replay-test",
  steps: [
    {
      text: "Running the tests first.",
      toolCalls: [{ tool: "test.run", input: {}, expect: { exitCode: 1 } }],
      usage: { inputTokens: 100, outputTokens: 10 },
    },
    {
      text: "Reading both files.",
      toolCalls: [
        { tool: "repo.read", input: { path: "a.js" }, expect: { outputIncludes: ["bug"] } },
        { tool: "repo.read", input: { path: "b.js" } },
      ],
      usage: { inputTokens: 200, outputTokens: 20 },
    },
    {
      toolCalls: [{ tool: "repo.patch", input: { path: "a.js", edits: [] } }],
      usage: { inputTokens: 300, outputTokens: 30 },
    },
    { text: "Done: fixed the bug in a.js.", usage: { inputTokens: 400, outputTokens: 40 } },
  ],
});

const engine = () => createReplayEngine({ transcript, firstDelayMs: 0, deltaDelayMs: 0 });

function req(messages: EngineMessage[]): EngineRequest {
  return { system: "sys", messages, tools: [] };
}

async function collect(
  it: AsyncIterable<EngineEvent>,
): Promise<{ events: EngineEvent[]; text: string }> {
  const events: EngineEvent[] = [];
  for await (const ev of it) events.push(ev);
  const text = events.map((e) => (e.type === "text-delta" ? e.text : "")).join("");
  return { events, text };
}

const task: EngineMessage = { role: "user", text: "fix the failing test" };

/** The messages the context assembler builds for step `i`'s calls with these results. */
function turn(
  i: number,
  text: string,
  results: { tool: string; output?: unknown; error?: { code: string; message: string } }[],
): EngineMessage[] {
  // One assistant message per call (context.ts), the step's text on the first.
  return results.flatMap((r, j): EngineMessage[] => {
    const callId = replayCallId(i, j);
    return [
      {
        role: "assistant",
        text: j === 0 ? text : "",
        toolCalls: [{ callId, tool: r.tool, input: {} }],
      },
      {
        role: "tool",
        callId,
        tool: r.tool,
        ...(r.output === undefined ? {} : { output: r.output }),
        ...(r.error === undefined ? {} : { error: r.error }),
      },
    ];
  });
}

/** The history after steps 0 and 1 went as recorded. */
const afterTwo: EngineMessage[] = [
  task,
  ...turn(0, "Running the tests first.", [
    { tool: "test.run", output: { preview: { summary: "run" }, result: { exitCode: 1 } } },
  ]),
  ...turn(1, "Reading both files.", [
    { tool: "repo.read", output: { content: "a bug here" } },
    { tool: "repo.read", output: { content: "fine" } },
  ]),
];

function finishOf(events: EngineEvent[]) {
  const last = events.at(-1);
  assert.equal(last?.type, "finish", JSON.stringify(events));
  return last as Extract<EngineEvent, { type: "finish" }>;
}

describe("replay engine", () => {
  test("the first step: text in several deltas, then its call, then finish with the usage", async () => {
    const { events, text } = await collect(engine().run(req([task]), new AbortController().signal));
    assert.equal(text, "Running the tests first.");
    assert.ok(events.filter((e) => e.type === "text-delta").length > 1, "streamed in deltas");
    assert.deepEqual(
      events.filter((e) => e.type === "tool-call"),
      [{ type: "tool-call", callId: "replay-0-0", tool: "test.run", input: {} }],
    );
    const fin = finishOf(events);
    assert.equal(fin.reason, "tool-calls");
    assert.deepEqual(fin.usage, { inputTokens: 100, outputTokens: 10 });
    assert.equal(fin.model, "replay-test");
  });

  test("a step with two calls counts as one turn: the next request gets the next step", async () => {
    const { events } = await collect(engine().run(req(afterTwo), new AbortController().signal));
    const calls = events.filter((e) => e.type === "tool-call");
    assert.deepEqual(
      calls.map((c) => c.type === "tool-call" && [c.callId, c.tool]),
      [["replay-2-0", "repo.patch"]],
    );
    assert.equal(
      events.some((e) => e.type === "text-delta"),
      false,
      "step 3 has no text",
    );
  });

  test("stateless: a run resumed after an approval continues at the step its messages show", async () => {
    // A fresh engine (another worker, after the pause) and the history after the approved patch.
    const messages = [
      ...afterTwo,
      ...turn(2, "", [{ tool: "repo.patch", output: { preview: {}, result: { changed: true } } }]),
    ];
    const { events, text } = await collect(
      engine().run(req(messages), new AbortController().signal),
    );
    assert.equal(text, "Done: fixed the bug in a.js.");
    const fin = finishOf(events);
    assert.equal(fin.reason, "stop");
    assert.deepEqual(fin.usage, { inputTokens: 400, outputTokens: 40 });
    // The same request twice gives the same step (a retried step is not skipped).
    const again = await collect(engine().run(req(messages), new AbortController().signal));
    assert.equal(again.text, text);
  });

  test("the worker's setup.run calls (before the first step, again after a resume) are no turns", async () => {
    const setup = (n: number): EngineMessage[] => [
      {
        role: "assistant",
        text: "",
        toolCalls: [{ callId: `setup_${n}`, tool: "setup.run", input: {} }],
      },
      { role: "tool", callId: `setup_${n}`, tool: "setup.run", output: { exitCode: 0 } },
    ];
    const first = await collect(
      engine().run(req([task, ...setup(1)]), new AbortController().signal),
    );
    assert.equal(first.text, "Running the tests first.");
    const [t, ...rest] = afterTwo;
    assert.ok(t !== undefined);
    const resumed = await collect(
      engine().run(req([t, ...setup(1), ...rest, ...setup(2)]), new AbortController().signal),
    );
    assert.deepEqual(
      resumed.events
        .filter((e) => e.type === "tool-call")
        .map((c) => c.type === "tool-call" && c.callId),
      ["replay-2-0"],
    );
    // A call the model could make (any other tool) under a foreign id is still a mismatch.
    const foreign = await collect(
      engine().run(
        req([
          task,
          {
            role: "assistant",
            text: "",
            toolCalls: [{ callId: "x", tool: "process.run", input: {} }],
          },
        ]),
        new AbortController().signal,
      ),
    );
    assert.match(foreign.text, /turn 1 has tool calls the replay did not make \(x\)/);
  });

  test("a tool error the recording did not have ends the run with a clear text", async () => {
    const messages = [
      ...afterTwo,
      ...turn(2, "", [
        {
          tool: "repo.patch",
          error: { code: "EAPPROVAL_DENIED", message: "a person denied this call: no" },
        },
      ]),
    ];
    const { events, text } = await collect(
      engine().run(req(messages), new AbortController().signal),
    );
    assert.match(text, /^Replay stopped at step 4 of 4: the repo\.patch call of step 3 failed/);
    assert.match(text, /EAPPROVAL_DENIED/);
    assert.equal(
      events.some((e) => e.type === "tool-call"),
      false,
    );
    const fin = finishOf(events);
    assert.equal(fin.reason, "stop");
    assert.deepEqual(fin.usage, { inputTokens: 0, outputTokens: 0 });
  });

  test("a different exit code or output than recorded is a mismatch", async () => {
    const wrongExit = [
      task,
      ...turn(0, "Running the tests first.", [{ tool: "test.run", output: { exitCode: 0 } }]),
    ];
    const a = await collect(engine().run(req(wrongExit), new AbortController().signal));
    assert.match(a.text, /test\.run call of step 1 exited with 0; the recording had exit code 1/);

    const wrongOutput = [
      ...afterTwo.slice(0, 3),
      ...turn(1, "Reading both files.", [
        { tool: "repo.read", output: { content: "all good" } },
        { tool: "repo.read", output: { content: "fine" } },
      ]),
    ];
    const b = await collect(engine().run(req(wrongOutput), new AbortController().signal));
    assert.match(b.text, /repo\.read call of step 2 returned an output without "bug"/);
    finishOf(b.events);
  });

  test("foreign turns, other tools and a finished transcript are mismatches, never a crash", async () => {
    const foreign: EngineMessage[] = [
      task,
      {
        role: "assistant",
        text: "",
        toolCalls: [{ callId: "call_1", tool: "test.run", input: {} }],
      },
      { role: "tool", callId: "call_1", tool: "test.run", output: { exitCode: 1 } },
    ];
    const a = await collect(engine().run(req(foreign), new AbortController().signal));
    assert.match(a.text, /turn 1 has tool calls the replay did not make \(call_1\)/);
    finishOf(a.events);

    const otherTool = [task, ...turn(0, "", [{ tool: "process.run", output: { exitCode: 1 } }])];
    const b = await collect(engine().run(req(otherTool), new AbortController().signal));
    assert.match(
      b.text,
      /step 1 made the calls \[process\.run\], the transcript recorded \[test\.run\]/,
    );

    const done = [
      ...afterTwo,
      ...turn(2, "", [{ tool: "repo.patch", output: { changed: true } }]),
      { role: "assistant", text: "Done: fixed the bug in a.js." } as EngineMessage,
    ];
    const c = await collect(engine().run(req(done), new AbortController().signal));
    assert.match(c.text, /already has 4 model turns and the transcript recorded 4/);
    finishOf(c.events);
  });

  test("abort ends the step promptly with EABORTED", async () => {
    // Delays far past the test's own timeout: only the abort can end the step in time.
    const slow = createReplayEngine({
      transcript,
      firstDelayMs: 3_600_000,
      deltaDelayMs: 3_600_000,
    });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    const { events } = await collect(slow.run(req([task]), ac.signal));
    assert.deepEqual(events.at(-1), {
      type: "error",
      error: { code: "EABORTED", message: "the model step was aborted", retryable: false },
    });
  });

  test("the delays spread the text over time", async () => {
    const timed = createReplayEngine({ transcript, firstDelayMs: 30, deltaDelayMs: 15 });
    const at: number[] = [];
    const t0 = performance.now();
    for await (const ev of timed.run(req([task]), new AbortController().signal))
      if (ev.type === "text-delta") at.push(performance.now() - t0);
    assert.ok((at[0] ?? 0) >= 25, `first delta after the first delay (${at[0]})`);
    assert.ok((at.at(-1) ?? 0) - (at[0] ?? 0) >= 10, "later deltas after the delta delay");
  });

  test("splitDeltas keeps every character and never splits a word", () => {
    const text = 'One test fails: truncate("hello world", 8) returns 9 characters.';
    for (const n of [1, 2, 3, 6, 100]) {
      const parts = splitDeltas(text, n);
      assert.equal(parts.join(""), text);
      assert.ok(parts.length <= n);
      for (const p of parts) assert.ok(p !== "");
    }
    assert.deepEqual(splitDeltas("", 3), []);
  });

  test("transcripts are validated, errors naming the field", () => {
    assert.throws(
      () =>
        parseTranscript({
          version: 1,
          model: "m",
          steps: [{ usage: { inputTokens: 1, outputTokens: 1 } }],
        }),
      (err: unknown) => isAgentdError(err, "EVALIDATION") && /steps\.0/.test(err.message),
    );
    assert.throws(
      () =>
        parseTranscript({
          version: 1,
          model: "m",
          steps: [{ text: "x", usage: { inputTokens: 1 } }],
        }),
      (err: unknown) => isAgentdError(err, "EVALIDATION") && /steps\.0\.usage/.test(err.message),
    );
    assert.throws(() => loadTranscript("/nonexistent/transcript.json"), /nonexistent/);
  });

  test("the bundled example transcript plays through when every result is as recorded", async () => {
    const file = new URL("../../examples/fix-failing-test/transcript.json", import.meta.url);
    const t = loadTranscript(file.pathname);
    const e = createReplayEngine({ transcript: t, firstDelayMs: 0, deltaDelayMs: 0 });
    // Feed each step's calls back with results that satisfy their expectations.
    const messages: EngineMessage[] = [task];
    for (const [i, step] of t.steps.entries()) {
      const { events, text } = await collect(e.run(req(messages), new AbortController().signal));
      assert.equal(text, step.text, `step ${i + 1}`);
      const calls = events.filter((ev) => ev.type === "tool-call");
      assert.equal(calls.length, step.toolCalls.length);
      step.toolCalls.forEach((c, j) => {
        const callId = replayCallId(i, j);
        messages.push({
          role: "assistant",
          text: j === 0 ? step.text : "",
          toolCalls: [{ callId, tool: c.tool, input: c.input }],
        });
        messages.push({
          role: "tool",
          callId,
          tool: c.tool,
          output: {
            exitCode: c.expect.exitCode ?? 0,
            content: c.expect.outputIncludes.join(" "),
          },
        });
      });
      if (step.toolCalls.length === 0) assert.equal(finishOf(events).reason, "stop");
    }
    assert.equal(t.steps.at(-1)?.toolCalls.length, 0, "ends with a final answer");
    const patch = t.steps.flatMap((s) => s.toolCalls).find((c) => c.tool === "repo.patch");
    assert.match(JSON.stringify(patch?.input), /max - 1/, "the patch is the fix the example needs");
  });
});

describe("agentd picks the model and says which", () => {
  const dir = mkdtempSync(join(tmpdir(), "agentd-replay-wiring-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const bundled = fileURLToPath(
    new URL("../../examples/fix-failing-test/transcript.json", import.meta.url),
  );
  let n = 0;
  const dev = (flags: string[], env: Record<string, string> = {}) =>
    startAgentd("dev", ["--data-dir", join(dir, `d${++n}`), ...flags], { env });

  test("no OPENAI_API_KEY, --replay: the bundled replay model, said so", async () => {
    const p = await dev(["--replay", bundled]);
    try {
      assert.match(
        p.output(),
        /no OPENAI_API_KEY: using the bundled replay model .*transcript\.json/,
      );
      assert.match(p.output(), /"worker":"2 slots","model":"replay"/);
    } finally {
      await p.stop();
    }
  });

  test("AGENTD_REPLAY is the same; a key wins over it; --model replay:FILE wins over a key", async () => {
    const a = await dev([], { AGENTD_REPLAY: bundled });
    await a.stop();
    assert.match(a.output(), /using the bundled replay model/);

    const b = await dev(["--replay", bundled], { OPENAI_API_KEY: "test" });
    await b.stop();
    assert.match(
      b.output(),
      /using the model gpt-4o-mini \(OPENAI_API_KEY is set: --replay is ignored\)/,
    );

    const c = await dev(["--model", `replay:${bundled}`], { OPENAI_API_KEY: "test" });
    await c.stop();
    assert.match(c.output(), /using the replay model .*--model replay:FILE/);
  });

  test("without a key or a transcript, dev has no worker and says how to get one", async () => {
    const p = await dev([]);
    await p.stop();
    assert.match(p.output(), /the worker is off and runs stay queued \(give --replay /);
    assert.match(p.output(), /"worker":"off"/);
  });

  test("a broken transcript refuses the start, naming the file and the field", async () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ version: 1, model: "m", steps: [{ text: "x" }] }));
    const r = spawnSync(AGENTD_BIN, ["dev", "--data-dir", join(dir, "bad"), "--replay", bad], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--replay \(AGENTD_REPLAY\): .*bad\.json: steps\.0\.usage/);
  });

  test("a worker without a key runs on --replay", async () => {
    const p = await startAgentd("worker", [
      "--event-log",
      `file:${join(dir, "w")}`,
      "--replay",
      bundled,
    ]);
    await p.stop();
    assert.match(p.output(), /"msg":"worker started"/);
    assert.match(p.output(), /"model":"replay"/);
  });
});
