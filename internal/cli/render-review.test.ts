/**
 * agentctl's view of reviewer.verdict and reviewer.overridden (events and watch): what took
 * effect, what the model said, the note and the attention flag are shown; hostile text
 * (escape sequences, newlines, bidi controls in the model's reasoning or a reason) is
 * escaped, and long reasoning is clipped to one line.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { eventLine, Renderer } from "./render.ts";
import { makeStyle } from "./style.ts";

const HOSTILE = "fine\u001b[2J\u001b]0;owned\u0007\r\nSYSTEM: approved\u202e";

function verdict(over: Record<string, unknown> = {}): Event {
  return create(EventSchema, {
    runId: "01M8JE5P04G7SKXVAG8HKGV19Y",
    seq: 7n,
    type: "reviewer.verdict",
    payload: {
      case: "reviewerVerdict",
      value: {
        callId: "c1",
        verdict: "ask",
        modelVerdict: "allow",
        reasoning: `${HOSTILE} ${"x".repeat(5000)}`,
        confidence: 1,
        model: "gpt-x",
        promptDigest: "ab".repeat(32),
        note: "the policy needs a person for this call (reviewer.personFor: highRiskCommand)",
        approvalId: "apr_x_1",
        ...over,
      },
    },
  });
}

const overridden = create(EventSchema, {
  runId: "01M8JE5P04G7SKXVAG8HKGV19Y",
  seq: 9n,
  type: "reviewer.overridden",
  payload: {
    case: "reviewerOverridden",
    value: {
      callId: "c1",
      previousVerdict: "allow",
      verdict: "deny",
      reason: HOSTILE,
      overriddenBy: "ops\u001b[31m",
      attention: true,
    },
  },
});

function watched(events: Event[]): string {
  let out = "";
  const r = new Renderer({ out: { write: (s) => (out += s), control: () => {} }, color: false });
  for (const e of events) r.event(e);
  r.close();
  return out;
}

// Any raw control character (bar the newline a line ends with) or bidi override.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f\u202e]/;

describe("reviewer records in agentctl", () => {
  it("events: one escaped, clipped line each", () => {
    const line = eventLine(verdict(), makeStyle(false));
    assert.match(
      line,
      /reviewer\.verdict +c1 ask \(gpt-x: allow 1\.00\) apr_x_1 \[the policy needs a person/,
    );
    assert.match(line, /prompt=abababababab/);
    assert.doesNotMatch(line, RAW);
    assert.equal(line.includes("\n"), false);
    assert.ok(line.length < 800, `a line of ${line.length} characters`);
    const o = eventLine(overridden, makeStyle(false));
    assert.match(o, /reviewer\.overridden +c1 allow → deny by ops.*ATTENTION/);
    assert.doesNotMatch(o, RAW);
  });

  it("watch: says who decided, what the model said, and flags an allow that already ran", () => {
    const out = watched([
      verdict(),
      verdict({ verdict: "allow", modelVerdict: "allow", note: "" }),
      overridden,
    ]);
    assert.match(out, /\? reviewer asks a person c1 \(the model said allow\)/);
    assert.match(out, /✔ reviewer allowed c1/);
    assert.match(out, /⚑ reviewer overridden c1: allow → deny .*ATTENTION: the call already ran/);
    assert.doesNotMatch(out.replaceAll("\n", ""), RAW);
  });

  it("a reviewer that gave no usable answer says so", () => {
    const line = eventLine(
      verdict({
        modelVerdict: "",
        confidence: 0,
        reasoning: "",
        note: "the reviewer did not answer within 50 ms",
      }),
      makeStyle(false),
    );
    assert.match(
      line,
      /c1 ask \(gpt-x: no usable answer\) apr_x_1 \[the reviewer did not answer within 50 ms\]/,
    );
  });
});
