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
