/** What the console shows an approver of a command: exactly what runs, nothing hidden. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { shellQuote, shownCommand, visible } from "../console/src/shown-text.ts";

it("quotes arguments so that different argv never look the same", () => {
  assert.notEqual(shownCommand(["sh", "-c", "a b"]), shownCommand(["sh", "-c", "a", "b"]));
  assert.equal(shownCommand(["sh", "-c", "a b"]), "sh -c 'a b'");
  assert.equal(shellQuote("it's"), `'it'\\''s'`);
  assert.equal(shellQuote("--flag=x,y"), "--flag=x,y");
  assert.equal(shellQuote(""), "''");
});

it("shows characters that hide or reorder text as escapes", () => {
  assert.equal(visible("rm -rf /\u202e/gnp.txt"), "rm -rf /\\u{202e}/gnp.txt");
  assert.equal(visible("a\u200bb\nc\u0000"), "a\\u{200b}b\\u{a}c\\u{0}");
  assert.equal(visible("plain text, ünïcödé"), "plain text, ünïcödé");
});

it("a slow GetRun answer never replaces a newer one on the run page", async () => {
  const { create } = await import("@bufbuild/protobuf");
  const { RunSchema } = await import("../gen/agentd/v1/run_service_pb.js");
  const { newerRun } = await import("../console/src/newer-run.ts");
  const waiting = create(RunSchema, { runId: "r", lastSeq: 40n, pendingApprovalId: "apr_1" });
  const stale = create(RunSchema, { runId: "r", lastSeq: 38n, pendingApprovalId: "" });
  const later = create(RunSchema, { runId: "r", lastSeq: 41n });
  assert.equal(newerRun(waiting, stale), waiting, "the earlier request's answer came last");
  assert.equal(newerRun(waiting, later), later);
  assert.equal(newerRun(undefined, stale), stale);
  assert.equal(newerRun(waiting, undefined), undefined);
});

it("a tool result with a non-zero exit or a failing test never shows as ok", async () => {
  const { create } = await import("@bufbuild/protobuf");
  const { ToolResultSchema } = await import("../gen/agentd/v1/events_pb.js");
  const { toolStatus } = await import("../console/src/tool-status.ts");
  const status = (init: Parameters<typeof create<typeof ToolResultSchema>>[1]) =>
    toolStatus(create(ToolResultSchema, init));
  assert.deepEqual(status({ ok: true }), { cls: "ok", text: "ok" });
  assert.deepEqual(status({ ok: true, exitCode: 1 }), { cls: "bad", text: "failed · exit 1" });
  assert.deepEqual(status({ ok: false, error: { code: "ENOTFOUND", message: "go" } }), {
    cls: "bad",
    text: "failed: ENOTFOUND",
  });
  const tests = { passed: 14, failed: 2, skipped: 1, errors: 0, failures: [] };
  assert.deepEqual(status({ ok: true, exitCode: 1, tests }), {
    cls: "bad",
    text: "2 failed, 14 passed, 1 skipped · exit 1",
  });
  assert.deepEqual(status({ ok: true, tests: { ...tests, failed: 0 } }), {
    cls: "ok",
    text: "14 passed, 1 skipped",
  });
});

it("the Command row is the line exactly as it will run (`;`, `&&`, `>`, quotes kept), hidden characters shown", async () => {
  const { commandFacts, commandLine, visibleText } = await import("../console/src/shown-text.ts");
  const line = "echo 'a b'; rm -rf ~ && cat x > y\u202e\x1b]52;c;cm0=\x07";
  // The kernel's preview of a command (internal/kernel/kernel.ts): the line in the summary.
  const facts = commandFacts({
    summary: `run ${JSON.stringify(line)} in /workspace`,
    argv: ["echo", "a b", "rm", "-rf", "~", "cat", "x", "y\u202e\x1b]52;c;cm0=\x07"],
    cwd: "/workspace",
  });
  assert.equal(
    facts?.line,
    "echo 'a b'; rm -rf ~ && cat x > y\\u{202e}\\u{1b}]52;c;cm0=\\u{7}",
    "the separators the argv drops are on the Command row",
  );
  assert.equal(facts?.words.startsWith("echo 'a b' rm -rf"), true, "the words are not the line");
  assert.equal(facts?.cwd, "/workspace");
  assert.equal(commandLine(`run ${JSON.stringify("a;b")} in /w`), "a;b");
  assert.equal(commandLine("patch a.txt: 1 hunk(s), +1 -0"), undefined);
  // A summary that is not a command's: no Command row, the argv row says what it is.
  const other = commandFacts({ summary: "something else", argv: ["a", "b"], cwd: "" });
  assert.equal(other?.line, undefined);
  assert.equal(other?.words, "a b");
  assert.equal(commandFacts({ summary: "x", argv: [], cwd: "" }), undefined);
  assert.equal(visibleText("a\tb\nc\u200b\u2066d\u00a0e"), "a\tb\nc\\u{200b}\\u{2066}d\\u{a0}e");
});

it("a link followed before the route listener was attached still shows its page", async () => {
  const { watchRoute } = await import("../console/src/hash-route.ts");
  const target = new EventTarget();
  let hash = "#/runs";
  const seen: string[] = [];
  hash = "#/runs/r%201"; // changed between the first render and the effect: no event heard
  const stop = watchRoute(
    target,
    () => hash,
    (r) => seen.push(r.page === "run" ? r.runId : r.page),
  );
  assert.deepEqual(seen, ["r 1"]);
  hash = "#/approvals";
  target.dispatchEvent(new Event("hashchange"));
  stop();
  hash = "#/runs";
  target.dispatchEvent(new Event("hashchange"));
  assert.deepEqual(seen, ["r 1", "approvals"]);
});

it("a run's reviewer verdicts, their overrides and a candidate's differences read as state lines", async () => {
  const { create } = await import("@bufbuild/protobuf");
  const { Decision, EventSchema } = await import("../gen/agentd/v1/events_pb.js");
  const { EMPTY, fold } = await import("../console/src/timeline.ts");
  const ev = (seq: number, type: string, payload: Record<string, unknown>) =>
    create(EventSchema, { seq: BigInt(seq), type, payload: payload as never });
  const t = fold(
    EMPTY,
    [
      ev(1, "reviewer.verdict", {
        case: "reviewerVerdict",
        value: {
          callId: "c1",
          verdict: "ask",
          modelVerdict: "allow",
          confidence: 0.95,
          model: "gpt-x",
          reasoning: "looks fine",
          note: "the policy needs a person for this call",
        },
      }),
      ev(2, "reviewer.overridden", {
        case: "reviewerOverridden",
        value: {
          callId: "c1",
          previousVerdict: "allow",
          verdict: "deny",
          reason: "no",
          overriddenBy: "alice",
          attention: true,
        },
      }),
      ev(3, "policy.shadow", {
        case: "policyShadow",
        value: {
          callId: "c2",
          tool: "network",
          summary: "connect more.test:443",
          enforced: { decision: Decision.PREVIEW_APPROVAL, rule: "network.approval=risk" },
          candidate: { decision: Decision.AUTO, rule: "network.allow", policyFile: "next.yaml" },
        },
      }),
    ],
    () => undefined,
  );
  const lines = t.items.map((i) =>
    i.kind === "state" ? `${i.type}|${i.alert === true}|${i.detail}` : i.kind,
  );
  assert.deepEqual(lines, [
    "reviewer.verdict|false|call c1: the model reviewer (gpt-x) said allow at confidence 0.95; took effect: ask (the policy needs a person for this call). looks fine",
    "reviewer.overridden|true|call c1: alice overrode the reviewer's allow with deny: no",
    "policy.shadow|false|call c2 network: the candidate policy next.yaml would auto (network.allow); enforced: ask a person (network.approval=risk). connect more.test:443",
  ]);
});
