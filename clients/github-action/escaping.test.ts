/**
 * What the action writes where GitHub parses it: the summary's Markdown (markdown.ts,
 * summary.ts), the output file (outputs.ts, read back with the runner's parsing) and the
 * log's workflow commands (log.ts), each given hostile text.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { relayLines } from "./log.ts";
import { clip, inline, linkTarget, preBlock } from "./markdown.ts";
import { formatOutputs } from "./outputs.ts";
import { readReport } from "./report.ts";
import { parseOutputFile } from "./runner-fixture.ts";
import { MAX_ROWS, renderSummary } from "./summary.ts";

const RUN = "01JABCDEFGHJKMNPQRSTVWXYZ0";

describe("markdown: run text is inert", () => {
  it("inline encodes every ASCII punctuation mark and flattens lines", () => {
    assert.equal(inline("a|b"), "a&#124;b");
    assert.equal(inline("<img src=x>"), "&#60;img src&#61;x&#62;");
    assert.equal(inline("[x](https://e)"), "&#91;x&#93;&#40;https&#58;&#47;&#47;e&#41;");
    assert.equal(inline("one\ntwo\r\nthree"), "one ⏎ two ⏎ three");
    assert.equal(inline("`code`"), "&#96;code&#96;");
    assert.equal(inline("@octocat"), "&#64;&#8203;octocat");
    assert.equal(inline("naïve ünïcode"), "naïve ünïcode", "letters beyond ASCII stay");
  });

  it("inline replaces control characters and bidirectional overrides", () => {
    assert.equal(inline("a\u202eb\u0007c\u200bd"), "a\ufffdb\ufffdc\ufffdd");
  });

  it("inline clips to the limit by code points, marking the cut", () => {
    assert.equal(inline("x".repeat(500), 10), `${"x".repeat(9)}…`);
    assert.equal(clip("😀😀😀", 2), "😀…");
  });

  it("preBlock keeps lines, and its text cannot close the block", () => {
    const b = preBlock("line 1\n</pre><script>x</script>\n| a |");
    assert.equal(b.split("</pre>").length, 2, "only its own closing tag");
    assert.ok(!b.includes("<script"));
    assert.equal(b.split("\n").length, 3);
    assert.ok(b.startsWith("<pre>") && b.endsWith("</pre>"));
  });

  it("linkTarget takes http(s) only and encodes what could end the target", () => {
    assert.equal(linkTarget("javascript:alert(1)"), undefined);
    assert.equal(linkTarget("data:text/html,x"), undefined);
    assert.equal(linkTarget("not a url"), undefined);
    assert.equal(linkTarget("https://h/ui/#/runs/(x) y"), "https://h/ui/#/runs/%28x%29%20y");
  });
});

describe("summary", () => {
  const event = (o: Record<string, unknown>) => JSON.stringify(o);
  const hostile = "x | y](https://evil) <b>bold</b>\n# heading";
  const ndjson = [
    event({ type: "run.queued", runQueued: { prompt: hostile } }),
    event({
      type: "tool.call",
      toolCall: {
        callId: "c1",
        tool: "process.run",
        inputJson: JSON.stringify({ command: hostile }),
      },
    }),
    event({
      type: "policy.decision",
      policyDecision: {
        callId: "c1",
        decision: "DECISION_DENY",
        rule: "denyCommands",
        reason: hostile,
      },
    }),
    event({
      type: "tool.result",
      toolResult: { callId: "c1", error: { code: "EPOLICY", message: hostile } },
    }),
    event({ type: "tool.call", toolCall: { callId: 7, tool: ["not a string"] } }),
    "not json | at all",
    event({
      type: "run.completed",
      runCompleted: {
        summary: hostile,
        usage: { inputTokens: "12", outputTokens: "3" },
        costMicros: "1500",
      },
    }),
  ].join("\n");

  it("reads the calls, the decision and the result; skips lines of the wrong shape", () => {
    const r = readReport(ndjson);
    assert.equal(r.calls.length, 2);
    assert.equal(r.calls[0]?.decision, "denied");
    assert.equal(r.calls[0]?.result, `error: EPOLICY ${hostile}`);
    assert.equal(r.calls[1]?.tool, "", "a field of the wrong type is read as absent");
    assert.deepEqual(r.usage, { input: 12, output: 3, costMicros: 1500 });
    assert.equal(r.lastType, "run.completed");
  });

  it("every table row has five cells and the only link is the console's", () => {
    const md = renderSummary({
      runId: RUN,
      outcome: "completed",
      consoleUrl: "https://agentd.example",
      report: readReport(ndjson),
      reused: false,
    });
    const rows = md.split("\n").filter((l) => l.startsWith("| "));
    assert.equal(rows.length, 4, "header, rule and two calls");
    for (const row of rows) assert.equal(row.split("|").length - 1, 6, row);
    assert.deepEqual(md.match(/\]\(/g), ["]("]);
    assert.ok(
      md.includes(`[Open the run in agentd's console](https://agentd.example/ui/#/runs/${RUN})`),
    );
    assert.ok(!md.includes("<b>") && !md.includes("\n# heading"));
    assert.ok(md.includes("$0.0015"));
  });

  it("puts no escaped text in a code span, where references would show as written", () => {
    const waiting = [
      ndjson.split("\n")[1],
      event({
        type: "approval.requested",
        approvalRequested: {
          approvalId: "apr_1",
          callId: "c1",
          tool: "process.run",
          preview: { summary: hostile },
        },
      }),
    ].join("\n");
    const md = renderSummary({
      runId: RUN,
      outcome: "waiting",
      consoleUrl: "http://h:1",
      report: readReport(waiting),
      reused: false,
    });
    assert.ok(md.includes("approval <code>apr&#95;1</code>"), md);
    assert.doesNotMatch(md, /`[^`\n]*&#\d+;[^`\n]*`/);
  });

  it("lists at most MAX_ROWS calls and says how many more there are", () => {
    const many = Array.from({ length: MAX_ROWS + 5 }, (_, i) =>
      event({
        type: "tool.call",
        toolCall: { callId: `c${i}`, tool: "repo.read", inputJson: '{"path":"a"}' },
      }),
    ).join("\n");
    const md = renderSummary({
      runId: RUN,
      outcome: "failed",
      consoleUrl: "http://h:1",
      report: readReport(many),
      reused: false,
    });
    assert.equal(md.split("\n").filter((l) => /^\| \d+ \|/.test(l)).length, MAX_ROWS);
    assert.ok(md.includes("… and 5 more calls"));
  });
});

describe("outputs: a value cannot add an output", () => {
  it("multi-line values come back whole through the runner's parsing", () => {
    const values = { "run-id": RUN, outcome: "completed\nrun-id=evil\nx<<EOF", "patch-path": "" };
    const parsed = parseOutputFile(formatOutputs(values));
    assert.deepEqual(parsed, values);
  });

  it("a value holding the delimiter is refused; names are checked", () => {
    assert.throws(() => formatOutputs({ a: "x\nD\ny" }, "D"), /holds the delimiter/);
    assert.throws(() => formatOutputs({ "A=b": "x" }), /output name/);
  });

  it("the delimiter differs every time", () => {
    const first = formatOutputs({ a: "1" }).split("\n")[0];
    const second = formatOutputs({ a: "1" }).split("\n")[0];
    assert.notEqual(first, second);
    assert.match(first ?? "", /^a<<ghadelimiter_[0-9a-f]{32}$/);
  });
});

describe("log: relayed text cannot be a workflow command", () => {
  it("prefixes every line and drops carriage returns", () => {
    const out = relayLines(
      "agentctl: ",
      "ok\n::set-output name=a::b\r::add-mask::x\n  ::error::y\n",
    );
    for (const line of out.split("\n").filter((l) => l !== ""))
      assert.ok(line.startsWith("agentctl: "), JSON.stringify(line));
    assert.ok(!out.includes("\r"));
    assert.equal(out.split("\n").length - 1, 4);
  });
});
