/**
 * `agentctl policy report`'s summary and renderer: counts per transition and rule pair,
 * examples capped, duplicates and old events left out, --since parsed (hostile values
 * refused naming the flag), and hostile server text (ESC sequences, C1, bidi, newlines)
 * escaped in the text form and in the JSON form.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Decision, EventSchema, PolicyShadowSchema } from "../gen/agentd/v1/events_pb.js";
import { jsonLine } from "./output/serialize.ts";
import { parseSince, renderReport, type ShadowItem, summariseShadows } from "./policy-report.ts";
import { eventLine } from "./render.ts";
import { makeStyle } from "./style.ts";
import { UNSAFE_CHARS } from "./terminal-safe.ts";

const item = (
  runId: string,
  seq: number,
  enforced: [Decision, string],
  candidate: [Decision, string],
  tsMs = 2_000,
  extra: { tool?: string; summary?: string } = {},
): ShadowItem => ({
  runId,
  seq: BigInt(seq),
  tsMs,
  shadow: create(PolicyShadowSchema, {
    callId: `c${seq}`,
    tool: extra.tool ?? "process.run",
    summary: extra.summary ?? `run "cmd ${seq}"`,
    enforced: { decision: enforced[0], rule: enforced[1] },
    candidate: { decision: candidate[0], rule: candidate[1] },
  }),
});
const AUTO = Decision.AUTO;
const ASK = Decision.PREVIEW_APPROVAL;
const DENY = Decision.DENY;
const plain = makeStyle(false);

describe("policy report summary", () => {
  it("counts each transition and rule pair, keeps N examples, skips old and repeated events", () => {
    const items = [
      item(
        "r1",
        3,
        [AUTO, "capabilities.process.run.approval=risk"],
        [DENY, "risk.denyCommands:rm"],
      ),
      item(
        "r1",
        7,
        [AUTO, "capabilities.process.run.approval=risk"],
        [DENY, "risk.denyCommands:rm"],
      ),
      item(
        "r2",
        4,
        [AUTO, "capabilities.process.run.approval=risk"],
        [DENY, "risk.denyCommands:rm"],
      ),
      item(
        "r2",
        4,
        [AUTO, "capabilities.process.run.approval=risk"],
        [DENY, "risk.denyCommands:rm"],
      ),
      item("r2", 9, [AUTO, "a"], [DENY, "risk.denyCommands:curl"]),
      item(
        "r3",
        5,
        [DENY, "risk.denyCommands:git"],
        [AUTO, "capabilities.process.run.approval=never"],
      ),
      item("r3", 6, [AUTO, "x"], [ASK, "capabilities.process.run.approval=always"]),
      item("r4", 1, [AUTO, "x"], [ASK, "y"], 999),
    ];
    const r = summariseShadows(items, { sinceMs: 1_000, examples: 2 });
    assert.equal(r.total, 6, "the duplicate (r2 #4) and the old event (r4) are left out");
    assert.equal(r.runs, 3);
    const [first, ...rest] = r.transitions;
    assert.equal(first?.enforced, "auto");
    assert.equal(first?.candidate, "deny");
    assert.equal(first?.effect, "would deny");
    assert.equal(first?.count, 4);
    assert.equal(first?.rules[0]?.count, 3);
    assert.equal(first?.rules[0]?.examples.length, 2, "examples capped at 2");
    assert.deepEqual(
      first?.rules[0]?.examples.map((e) => `${e.runId}#${e.seq}`),
      ["r1#3", "r1#7"],
    );
    assert.deepEqual(
      rest.map((t) => `${t.enforced}>${t.candidate}:${t.count}:${t.effect}`).sort(),
      ["auto>ask:1:would ask", "deny>auto:1:would allow"],
    );
    const text = renderReport(r, plain);
    assert.match(text, /^6 call\(s\) or connection\(s\) in 3 run\(s\) since 1970-01-01T00:00:01Z/);
    assert.match(text, /auto → deny {2}4 {2}\(would deny\)/);
    assert.match(
      text,
      /3× enforced capabilities\.process\.run\.approval=risk → candidate risk\.denyCommands:rm/,
    );
    assert.match(text, /r1 #3 process\.run: run "cmd 3"/);
  });

  it("a candidate that changed in the window is counted apart, by digest; unread runs are said", () => {
    const withDigest = (it: ShadowItem, digest: string, file: string): ShadowItem => {
      if (it.shadow.candidate !== undefined) {
        it.shadow.candidate.policyDigest = digest;
        it.shadow.candidate.policyFile = file;
      }
      return it;
    };
    const a = "a".repeat(64);
    const b = "b".repeat(64);
    const r = summariseShadows(
      [
        withDigest(item("r1", 1, [AUTO, "x"], [DENY, "risk.denyCommands:rm"]), a, "v1.yaml"),
        withDigest(item("r1", 2, [AUTO, "x"], [DENY, "risk.denyCommands:rm"]), b, "v2.yaml"),
        withDigest(item("r2", 1, [AUTO, "x"], [DENY, "risk.denyCommands:rm"]), b, "v2.yaml"),
      ],
      { sinceMs: 1_000, examples: 3, runsNotRead: 7 },
    );
    assert.deepEqual(
      r.candidates.map((c) => `${c.digest.slice(0, 1)}:${c.count}`),
      ["b:2", "a:1"],
    );
    assert.deepEqual(
      r.transitions.map(
        (t) => `${t.candidateDigest.slice(0, 1)} ${t.enforced}>${t.candidate}:${t.count}`,
      ),
      ["b auto>deny:2", "a auto>deny:1"],
      "never merged into one count",
    );
    assert.equal(r.runsNotRead, 7);
    const text = renderReport(r, plain);
    assert.match(text, /7 older run\(s\) changed since .* were not read \(--max-runs\)/);
    assert.match(text, /the candidate changed in this window: 2 candidate policies/);
    assert.match(text, /bbbbbbbbbbbb v2\.yaml: 2 difference\(s\)/);
    assert.match(text, /auto → deny {2}1 {2}\(would deny\) {2}\[candidate aaaaaaaaaaaa\]/);
    const none = renderReport(
      summariseShadows([], { sinceMs: 0, examples: 3, runsNotRead: 2 }),
      plain,
    );
    assert.match(none, /^2 older run\(s\) .* not read/);
  });

  it("says so when there is nothing to report", () => {
    const text = renderReport(summariseShadows([], { sinceMs: 0, examples: 3 }), plain);
    assert.match(text, /^no policy\.shadow events since/);
  });

  it("escapes hostile server text: terminal escapes, C1, bidi, newlines, in text and JSON", () => {
    const hostile =
      "\u001b]52;c;ZXZpbA==\u0007\u001b[2J\u009b31m\u202egnp.exe\nFAKE: 0 differences\r";
    const r = summariseShadows(
      [
        item("r\u001b[1m1", 1, [AUTO, `rule${hostile}`], [DENY, hostile], 2_000, {
          tool: `tool${hostile}`,
          summary: hostile,
        }),
      ],
      { sinceMs: 0, examples: 3 },
    );
    const text = renderReport(r, plain);
    const bad = text.match(UNSAFE_CHARS);
    assert.equal(bad, null, `unescaped: ${JSON.stringify(bad)}`);
    assert.ok(text.includes("\\x1b]52;c;"), "the escape is shown, not acted on");
    assert.ok(text.includes("\\u202e"));
    // Each example is one line: an injected newline cannot fake a line of the report.
    assert.equal(text.split("\n").filter((l) => l.startsWith("FAKE")).length, 0);
    const json = jsonLine(r);
    assert.equal(json.match(UNSAFE_CHARS), null);
    assert.equal(JSON.parse(json).transitions[0].rules[0].examples[0].summary, hostile);
  });
});

describe("agentctl events: the policy.shadow line", () => {
  it("shows both decisions, rules and the candidate's file, escaped", () => {
    const hostile = "\u001b]0;pwned\u0007\u009b2J\u202e\nFAKE";
    const ev = create(EventSchema, {
      seq: 7n,
      type: "policy.shadow",
      payload: {
        case: "policyShadow",
        value: {
          callId: "c1",
          tool: "process.run",
          summary: `run ${hostile}`,
          enforced: {
            decision: Decision.AUTO,
            rule: `r${hostile}`,
            policyDigest: "ab".repeat(32),
            policyFile: "policy.yaml",
          },
          candidate: {
            decision: Decision.DENY,
            rule: "risk.denyCommands:echo",
            policyDigest: "cd".repeat(32),
            policyFile: `c${hostile}.yaml`,
          },
        },
      },
    });
    const line = eventLine(ev, plain);
    assert.equal(line.match(UNSAFE_CHARS), null, line);
    assert.equal(line.includes("\n"), false, "one line");
    assert.match(
      line,
      /c1 auto \(r.*\) → candidate denied \(risk\.denyCommands:echo\) policy=unknown c.*FAKE/,
    );
  });
});

describe("--since", () => {
  const now = Date.parse("2026-11-29T12:00:00Z");
  it("takes a duration or a timestamp", () => {
    assert.equal(parseSince("2h", now), now - 2 * 3_600_000);
    assert.equal(parseSince("2026-11-28T12:00:00Z", now), now - 86_400_000);
  });
  for (const bad of [
    "",
    "yesterday",
    "-5m",
    "2h; rm -rf /",
    "2026-13-45T99:00:00Z",
    "9999-01-01T00:00:00Z",
    "\u001b[2J",
  ]) {
    it(`refuses ${JSON.stringify(bad)}, naming --since`, () => {
      const r = parseSince(bad, now);
      assert.equal(typeof r, "string");
      assert.match(String(r), /^--since: /);
    });
  }
});
