/**
 * `-o/--output`: the accepted names, the usage errors of unknown names and malformed
 * templates, and what each format prints for a run, a list of runs and approvals
 * (real protobuf messages, escaping of hostile strings included).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { parse as parseYaml } from "yaml";
import { ApprovalSchema, RunSchema, RunState } from "../../gen/agentd/v1/run_service_pb.js";
import { UsageError } from "../client.ts";
import { outputFormatOf, parseOutputFormat } from "./format.ts";
import { formatList, formatResource } from "./print.ts";
import { approvalResource, runResource } from "./resources.ts";

function usage(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof UsageError, String(err));
    assert.match(err.message, message);
    return true;
  });
}

const HOSTILE = "fix it\x1b]0;owned\x07 now\x1b[2J\x9b31m\u202eevil\r";
const run = create(RunSchema, {
  runId: "01JRUN0000000000000000000A",
  state: RunState.PAUSED,
  prompt: HOSTILE,
  pendingApprovalId: "apr_01",
  eventCount: 7n,
  labels: { team: "core" },
});
const other = create(RunSchema, { runId: "01JRUN0000000000000000000B", state: RunState.COMPLETED });
const approval = create(ApprovalSchema, {
  approvalId: "apr_01",
  runId: run.runId,
  tool: "repo.patch",
});

describe("--output names", () => {
  it("accepts json, yaml, name and jsonpath=TEMPLATE (-o=… too)", () => {
    assert.equal(parseOutputFormat("json").kind, "json");
    assert.equal(parseOutputFormat("yaml").kind, "yaml");
    assert.equal(parseOutputFormat("name").kind, "name");
    assert.equal(parseOutputFormat("=yaml").kind, "yaml");
    const jp = parseOutputFormat("jsonpath={.state}");
    assert.equal(jp.kind, "jsonpath");
    assert.equal(jp.kind === "jsonpath" && jp.template, "{.state}");
    assert.equal(parseOutputFormat("=jsonpath={.a}").kind, "jsonpath");
  });

  it("an unknown name lists the accepted ones and the nearest", () => {
    usage(
      () => parseOutputFormat("jsn", "get"),
      /^unknown --output format "jsn": use json, yaml, name or jsonpath=TEMPLATE \(did you mean json\?\)$/,
    );
    usage(() => parseOutputFormat("yml"), /did you mean yaml\?/);
    usage(
      () => parseOutputFormat("jsonpth={.a}"),
      /unknown --output format "jsonpth".*did you mean jsonpath\?/,
    );
    usage(
      () => parseOutputFormat("table"),
      /^unknown --output format "table": use json, yaml, name or jsonpath=TEMPLATE$/,
    );
    usage(() => parseOutputFormat(""), /--output needs a format: json, yaml/);
    usage(() => parseOutputFormat("json=x"), /--output json takes no "=…"/);
  });

  it("jsonpath without a template, or a malformed one, is a usage error naming the character", () => {
    usage(
      () => parseOutputFormat("jsonpath"),
      /jsonpath needs a template after "=", e\.g\. -o jsonpath='\{\.runId\}'/,
    );
    usage(() => parseOutputFormat("jsonpath="), /jsonpath needs a template/);
    usage(
      () => parseOutputFormat("jsonpath={.items[*].runId"),
      /^--output jsonpath: unclosed "\{": an action ends with "\}" at character 1 of the template\n {2}\{\.items\[\*\]\.runId\n {2}\^$/,
    );
    usage(
      () => parseOutputFormat("jsonpath={range .items[*]}{.runId}"),
      /"\{range …\}" has no "\{end\}" at character 1/,
    );
    usage(
      () => parseOutputFormat("jsonpath={.a}{.b[x]}"),
      /at character 9 of the template\n.*\n {10}\^/,
    );
  });

  it("--json and -o together are refused; neither means the human text", () => {
    usage(
      () => outputFormatOf({ json: true, output: "yaml" }, "runs"),
      /give --json or --output, not both/,
    );
    assert.equal(outputFormatOf({ json: true }, "runs"), undefined);
    assert.equal(outputFormatOf({}, "runs"), undefined);
  });
});

describe("--output formats", () => {
  it("json: the run's protobuf JSON; a list is {items: [...]} with nextPageToken when more remain", () => {
    const one = formatResource(parseOutputFormat("json"), runResource(run));
    const doc = JSON.parse(one);
    assert.equal(doc.runId, run.runId);
    assert.equal(doc.state, "RUN_STATE_PAUSED");
    assert.equal(doc.eventCount, "7");
    assert.equal(doc.prompt, HOSTILE, "the value is intact");
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that none is there
    assert.doesNotMatch(one, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/, "no raw control character");
    const list = JSON.parse(
      formatList(parseOutputFormat("json"), [run, other].map(runResource), "next"),
    );
    assert.deepEqual(
      list.items.map((r: { runId: string }) => r.runId),
      [run.runId, other.runId],
    );
    assert.equal(list.nextPageToken, "next");
    assert.deepEqual(JSON.parse(formatList(parseOutputFormat("json"), [])), { items: [] });
  });

  it("yaml: the same document, hostile strings escaped in double quotes", () => {
    const text = formatResource(parseOutputFormat("yaml"), runResource(run));
    assert.match(text, /^runId: 01JRUN0000000000000000000A$/m);
    assert.match(text, /^state: RUN_STATE_PAUSED$/m);
    assert.deepEqual(
      parseYaml(text),
      JSON.parse(formatResource(parseOutputFormat("json"), runResource(run))),
    );
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that none is there
    assert.doesNotMatch(text, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/);
    const list = formatList(parseOutputFormat("yaml"), [approvalResource(approval)]);
    assert.deepEqual(parseYaml(list), {
      items: [{ approvalId: "apr_01", runId: run.runId, tool: "repo.patch" }],
    });
  });

  it("name: KIND/ID one per line, escaped", () => {
    assert.equal(formatResource(parseOutputFormat("name"), runResource(run)), `run/${run.runId}\n`);
    assert.equal(
      formatList(parseOutputFormat("name"), [run, other].map(runResource)),
      `run/${run.runId}\nrun/${other.runId}\n`,
    );
    assert.equal(
      formatList(parseOutputFormat("name"), [approvalResource(approval)]),
      "approval/apr_01\n",
    );
    const odd = create(ApprovalSchema, { approvalId: "apr_\x1b[31m" });
    assert.equal(
      formatResource(parseOutputFormat("name"), approvalResource(odd)),
      "approval/apr_\\x1b[31m\n",
    );
    assert.equal(formatList(parseOutputFormat("name"), []), "");
  });

  it("jsonpath: over the run, over {items}, and values escaped", () => {
    const jp = (t: string) => parseOutputFormat(`jsonpath=${t}`);
    assert.equal(formatResource(jp("{.state}"), runResource(run)), "RUN_STATE_PAUSED");
    assert.equal(
      formatResource(jp("{.labels.team}/{.pendingApprovalId}"), runResource(run)),
      "core/apr_01",
    );
    assert.equal(
      formatList(
        jp('{range .items[*]}{.runId} {.state}{"\\n"}{end}'),
        [run, other].map(runResource),
      ),
      `${run.runId} RUN_STATE_PAUSED\n${other.runId} RUN_STATE_COMPLETED\n`,
    );
    assert.equal(
      formatList(jp("{.items[*].runId}"), [run, other].map(runResource)),
      `${run.runId} ${other.runId}`,
    );
    assert.equal(
      formatResource(jp("{.prompt}"), runResource(run)),
      "fix it\\x1b]0;owned\\x07 now\\x1b[2J\\x9b31m\\u202eevil\\x0d",
    );
    assert.equal(
      formatResource(jp("{.summary}"), runResource(other)),
      "",
      "a default field is absent",
    );
  });
});
