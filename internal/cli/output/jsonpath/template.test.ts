/**
 * The kubectl-style JSONPath templates of `-o jsonpath=…`: parsing (and the positions its
 * errors name) and running them over documents shaped like agentctl's output, including
 * kubectl's own documentation example.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeTemplate } from "./execute-template.ts";
import { parseTemplate } from "./parse-template.ts";
import { JsonPathError } from "./syntax.ts";

const run = (template: string, doc: unknown): string =>
  executeTemplate(parseTemplate(template), doc);

const RUNS = {
  items: [
    { runId: "A1", state: "RUN_STATE_COMPLETED", eventCount: "12", labels: { team: "core" } },
    { runId: "B2", state: "RUN_STATE_FAILED", eventCount: "3", error: { code: "EMODEL" } },
    { runId: "C3", state: "RUN_STATE_PAUSED", eventCount: "40", pendingApprovalId: "apr_1" },
  ],
  nextPageToken: "tok",
};

// kubectl's documentation example (kubernetes.io/docs/reference/kubectl/jsonpath).
const KUBE = {
  kind: "List",
  items: [
    {
      kind: "None",
      metadata: { name: "127.0.0.1", labels: { "kubernetes.io/hostname": "127.0.0.1" } },
      status: {
        capacity: { cpu: "4" },
        addresses: [{ type: "LegacyHostIP", address: "127.0.0.1" }],
      },
    },
    {
      kind: "None",
      metadata: { name: "127.0.0.2" },
      status: {
        capacity: { cpu: "8" },
        addresses: [
          { type: "LegacyHostIP", address: "127.0.0.2" },
          { type: "another", address: "127.0.0.3" },
        ],
      },
    },
  ],
  users: [
    { name: "myself", user: {} },
    { name: "e2e", user: { username: "admin", password: "secret" } },
  ],
};

describe("jsonpath templates: what they print", () => {
  it("fields, text around them, and a path's values joined by spaces", () => {
    assert.equal(run("{.items[0].runId}", RUNS), "A1");
    assert.equal(
      run("run {.items[1].runId} is {.items[1].state}", RUNS),
      "run B2 is RUN_STATE_FAILED",
    );
    assert.equal(run("{.items[*].runId}", RUNS), "A1 B2 C3");
    assert.equal(run("{$.nextPageToken}", RUNS), "tok");
    assert.equal(run("{['nextPageToken']}", RUNS), "tok");
    assert.equal(run("{.items[0].labels.team}", RUNS), "core");
  });

  it("range … end repeats its body per value; quoted strings give newlines and tabs", () => {
    assert.equal(run('{range .items[*]}{.runId}{"\\n"}{end}', RUNS), "A1\nB2\nC3\n");
    assert.equal(
      run("{range .items[*]}{.runId}{'\\t'}{.eventCount}{\"\\n\"}{end}", RUNS),
      "A1\t12\nB2\t3\nC3\t40\n",
    );
    assert.equal(
      run("{range .items[*]}[{.runId},{$.nextPageToken}]{end}", RUNS),
      "[A1,tok][B2,tok][C3,tok]",
    );
    // Nested ranges.
    assert.equal(
      run("{range .items[*]}{range .status.addresses[*]}{.address};{end}|{end}", KUBE),
      "127.0.0.1;|127.0.0.2;127.0.0.3;|",
    );
  });

  it("indices, negative indices, unions and slices", () => {
    assert.equal(run("{.items[-1].runId}", RUNS), "C3");
    assert.equal(run("{.items[0,2].runId}", RUNS), "A1 C3");
    assert.equal(run("{.items[1:].runId}", RUNS), "B2 C3");
    assert.equal(run("{.items[:2].runId}", RUNS), "A1 B2");
    assert.equal(run("{.items[::-1].runId}", RUNS), "C3 B2 A1");
    assert.equal(run("{.items[-2:].runId}", RUNS), "B2 C3");
    assert.equal(run("{.items[0]['runId','state']}", RUNS), "A1 RUN_STATE_COMPLETED");
  });

  it("filters compare strings, numbers (int64 strings too) and test existence", () => {
    assert.equal(run('{.items[?(@.state=="RUN_STATE_FAILED")].runId}', RUNS), "B2");
    assert.equal(run("{.items[?(@.state != 'RUN_STATE_FAILED')].runId}", RUNS), "A1 C3");
    assert.equal(run("{.items[?(@.eventCount > 10)].runId}", RUNS), "A1 C3");
    assert.equal(run("{.items[?(@.eventCount <= 12)].runId}", RUNS), "A1 B2");
    assert.equal(run("{.items[?(@.pendingApprovalId)].runId}", RUNS), "C3");
    assert.equal(run("{.items[?(@.error.code == 'EMODEL')].runId}", RUNS), "B2");
    assert.equal(run('{.users[?(@.name=="e2e")].user.password}', KUBE), "secret");
  });

  it("kubectl's documented examples print what kubectl prints", () => {
    assert.equal(run("kind is {.kind}", KUBE), "kind is List");
    assert.equal(run("{..name}", KUBE), "127.0.0.1 127.0.0.2 myself e2e");
    assert.equal(run("{.items[*].metadata.name}", KUBE), "127.0.0.1 127.0.0.2");
    assert.equal(run("{.users[0].name}", KUBE), "myself");
    assert.equal(run("{.items[0].metadata.labels['kubernetes.io/hostname']}", KUBE), "127.0.0.1");
    assert.equal(
      run("{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}", KUBE),
      '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] ',
    );
    assert.equal(run("{.items[*].status.capacity.*}", KUBE), "4 8");
    assert.equal(run("{@.kind}", KUBE), "List");
  });

  it("a path that selects nothing prints nothing", () => {
    assert.equal(run("{.nope}", RUNS), "");
    assert.equal(run("{.items[7].runId}", RUNS), "");
    assert.equal(run("{.items.runId}", RUNS), "", "a field of an array selects nothing");
    assert.equal(run("{range .nope[*]}x{end}", RUNS), "");
    assert.equal(run("{.items[?(@.state=='none')].runId}", RUNS), "");
    assert.equal(run("{.items[*].runId}", { items: [] }), "");
  });

  it("control characters in values are escaped; the template's own text is not", () => {
    const doc = {
      prompt: "a\x1b]0;pwned\x07b\x9b2J\u202ec\r",
      obj: { k: "\x1b[2J" },
      n: 3,
      b: true,
    };
    assert.equal(run("{.prompt}", doc), "a\\x1b]0;pwned\\x07b\\x9b2J\\u202ec\\x0d");
    assert.equal(run("{.obj}", doc), '{"k":"\\u001b[2J"}');
    assert.equal(run('{.n}{"\\t"}{.b}{"\\n"}', doc), "3\ttrue\n");
    assert.equal(run("{.s}", { s: "line 1\nline 2\ttab" }), "line 1\nline 2\ttab");
  });
});

describe("jsonpath templates: malformed ones name the character and the problem", () => {
  const cases: [string, number, RegExp][] = [
    ["{.runId", 1, /unclosed "\{"/],
    ["x {range .items[*]}{.runId}", 3, /"\{range …\}" has no "\{end\}"/],
    ["{.a}{end}", 5, /"\{end\}" closes no "\{range\}"/],
    ["{runId}", 2, /unknown word "runId": a path starts with "\." \(e\.g\. \{\.runId\}\)/],
    ["{}", 1, /empty action/],
    ["{.items[*}", 10, /expected "\]" to close the "\[" at character 8/],
    ["{.items[}", 9, /expected \*, \?\(…\), a quoted name or a number after "\["/],
    ["{.}", 3, /expected a field name or \* after "\."/],
    ["{.a .b}", 5, /unexpected "\." \(one path or string per action/],
    ['{"\\q"}', 3, /unknown escape \\q/],
    ["{'abc}", 2, /unterminated string/],
    ["{.a{.b}}", 4, /unexpected "\{" inside the action opened at character 1/],
    ["{.items[?(@.a ~ 1)]}", 15, /expected ==, !=, <, <=, >, >= or "\)" in the filter/],
    ["{.items[?('x')]}", 11, /a filter without a comparison needs a path/],
    ["{.items[::0]}", 9, /a slice's step cannot be 0/],
    ["{range}", 7, /"\{range\}" needs a path/],
    ["{%}", 2, /expected a path \(e\.g\. \{\.runId\}\), a quoted string, range or end, found "%"/],
  ];
  for (const [template, position, problem] of cases) {
    it(`${template} → character ${position}`, () => {
      assert.throws(
        () => parseTemplate(template),
        (err: unknown) => {
          assert.ok(err instanceof JsonPathError, String(err));
          assert.match(err.problem, problem);
          assert.equal(err.position, position, err.message);
          return true;
        },
      );
    });
  }

  it("a lone } outside an action is text, as in kubectl", () => {
    assert.equal(run("a}b{.x}", { x: 1 }), "a}b1");
    assert.equal(run('{"{"}{.x}{"}"}', { x: 1 }), "{1}");
  });
});
