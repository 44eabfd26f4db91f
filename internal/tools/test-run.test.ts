/**
 * test.run against a real container of the base image: structured results from the
 * detected unittest command and from node --test (its spec output off a terminal), and a
 * detected `go test` in an image without Go: an ENOTFOUND error naming go and the image
 * that has it. Nothing here fakes the sandbox.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { countingExecs, sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { detectCommands } from "./detect-commands.ts";
import { invokeTool } from "./registry.ts";
import type { TestRunResult } from "./test-run.ts";
import { DEFAULT_DENY_PATTERNS, DEFAULT_TOOL_LIMITS, type ToolContext } from "./tool.ts";

let box: SandboxHandle;
let cleanup: () => Promise<void>;

const file = (path: string, text: string, mode = 0o644): WorkspaceFile => ({
  path,
  type: "file",
  mode,
  data: Buffer.from(text),
});

const SUREFIRE = readFileSync(
  new URL("test-results/fixtures/surefire-junit4.xml", import.meta.url),
  "utf8",
);
/** A Maven wrapper stand-in: writes a real Surefire report, prints nothing parseable. */
const MVNW = `#!/bin/sh
mkdir -p target/surefire-reports
cat > target/surefire-reports/TEST-ex.CalcTest.xml <<'EOF'
${SUREFIRE}
EOF
echo "[INFO] BUILD FAILURE"
exit 1
`;
/** A `go test -json` stream of 4000 failing tests, 100 characters of output each. */
const GEN_AWK = `BEGIN {
  for (i = 0; i < 4000; i++) {
    printf "{\\"Action\\":\\"output\\",\\"Package\\":\\"p\\",\\"Test\\":\\"T%d\\",\\"Output\\":\\"%0100d\\\\n\\"}\\n", i, i
    printf "{\\"Action\\":\\"fail\\",\\"Package\\":\\"p\\",\\"Test\\":\\"T%d\\"}\\n", i
  }
}
`;
const STALE = `<testsuite><testcase classname="old.Stale" name="fromAnEarlierBuild"><failure message="stale"/></testcase></testsuite>`;

const UNITTEST = `import unittest

class CalcTest(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1 + 1, 2)

    def test_fail(self):
        self.assertEqual(1 + 1, 3, "math is hard")

    @unittest.skip("later")
    def test_skip(self):
        pass
`;
const NODE_TEST = `const test = require("node:test");
const assert = require("node:assert");
test("adds", () => { assert.strictEqual(1 + 1, 2); });
test("adds wrong", () => { assert.strictEqual(2 + 2, 5, "two and two"); });
`;

const ctxWith = (commands: ToolContext["commands"]): ToolContext => ({
  sandbox: box,
  limits: { ...DEFAULT_TOOL_LIMITS, maxOutputBytes: 256 * 1024 },
  denyPatterns: DEFAULT_DENY_PATTERNS,
  commands,
});

before(async () => {
  const t = await testSandbox();
  cleanup = t.cleanup;
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("base"),
    limits: { ...TEST_LIMITS, memoryBytes: 512 * 1024 * 1024, pids: 128 },
    network: "none",
    workspaceTar: await packWorkspace([
      file("tests/test_calc.py", UNITTEST),
      file("calc.test.js", NODE_TEST),
      file("go.mod", "module example.com/calc\n\ngo 1.22\n"),
      file("mvnw", MVNW, 0o755),
      file("gen.awk", GEN_AWK),
      file("target/surefire-reports/TEST-old.Stale.xml", STALE),
    ]),
  });
});
after(async () => cleanup());

describe("test.run in the base image", () => {
  it("the detected unittest command: counts and the failing test with file, line and message", async () => {
    const commands = detectCommands({
      files: new Map(),
      pythonTests: ["tests/test_calc.py"],
      packages: new Set(),
    });
    const r = (await invokeTool(ctxWith(commands), "test.run", {})) as TestRunResult;
    assert.equal(r.command, "python3 -m unittest discover -s tests");
    assert.equal(r.exitCode, 1, r.stderr);
    assert.deepEqual(
      [r.tests?.format, r.tests?.passed, r.tests?.failed, r.tests?.skipped, r.tests?.errors],
      ["unittest", 1, 1, 1, 0],
      r.stderr,
    );
    assert.deepEqual(r.tests?.failures, [
      {
        name: "test_fail (test_calc.CalcTest.test_fail)",
        file: "tests/test_calc.py",
        line: 8,
        message: "AssertionError: 2 != 3 : math is hard",
      },
    ]);
  });

  it("node --test: its spec output off a terminal, parsed", async () => {
    const r = (await invokeTool(
      ctxWith({ test: { command: "node --test", source: "policy tools.test" } }),
      "test.run",
      {},
    )) as TestRunResult;
    assert.equal(r.exitCode, 1, r.stdout);
    assert.deepEqual([r.tests?.passed, r.tests?.failed], [1, 1], r.stdout);
    const f = r.tests?.failures[0];
    assert.deepEqual([f?.name, f?.file, f?.line], ["adds wrong", "calc.test.js", 4]);
    assert.match(f?.message ?? "", /two and two/);
  });

  it("Maven: the reports written by this call are read back; an earlier build's are not", async () => {
    const counting = countingExecs(box);
    const r = (await invokeTool(
      {
        ...ctxWith({
          test: { command: "./mvnw -B test", source: ".agent/config.yaml commands.test" },
        }),
        sandbox: counting.handle,
      },
      "test.run",
      {},
    )) as TestRunResult;
    assert.equal(r.exitCode, 1, r.stderr);
    assert.equal(r.stdout, "[INFO] BUILD FAILURE\n", "the output is the command's own");
    assert.deepEqual(
      [r.tests?.format, r.tests?.passed, r.tests?.failed, r.tests?.skipped, r.tests?.errors],
      ["junit", 1, 1, 1, 1],
    );
    assert.deepEqual(r.tests?.failures.map((f) => `${f.name}@${f.file}:${f.line}`).sort(), [
      "ex.CalcTest.addsWrong@CalcTest.java:7",
      "ex.CalcTest.throwsError@CalcTest.java:8",
    ]);
    assert.equal(counting.execs(), 3, "a marker, the command, the read-back");
    const left = await box.exec({
      argv: ["sh", "-c", "ls /tmp/.agentd | wc -l"],
      timeoutMs: 10_000,
      maxOutputBytes: 100,
    });
    assert.equal(left.stdout.trim(), "0", "the marker is removed");
  });

  it("other commands run in one exec, nothing read back", async () => {
    const counting = countingExecs(box);
    await invokeTool(
      {
        ...ctxWith({ test: { command: "echo no build tool here", source: "policy tools.test" } }),
        sandbox: counting.handle,
      },
      "test.run",
      {},
    );
    assert.equal(counting.execs(), 1);
  });

  it("a go test -json line: read whole up to 4x the cap, its text cut to the cap", async () => {
    const r = (await invokeTool(
      ctxWith({
        test: { command: "awk -f gen.awk; exit 1", source: "go.mod", output: "go-json" },
      }),
      "test.run",
      {},
    )) as TestRunResult;
    assert.equal(r.exitCode, 1, r.stderr);
    assert.deepEqual(
      [r.tests?.format, r.tests?.failed, r.tests?.moreFailures],
      ["go-json", 4000, 3950],
    );
    assert.equal(r.truncated, true);
    assert.ok(
      Buffer.byteLength(r.stdout) <= 256 * 1024 + 100,
      `${Buffer.byteLength(r.stdout)} bytes`,
    );
    assert.match(r.stdout, /^\[agentd: \d+ bytes of go test's output left out\]\n/);
    assert.match(r.stdout, /\n0{96}3999\n$/, "the tail is kept");
    assert.doesNotMatch(r.stdout, /"Action"/);
  });

  it("output in no known format: no tests field, the exit code speaks", async () => {
    const r = (await invokeTool(
      ctxWith({ test: { command: "echo hello; exit 3", source: "policy tools.test" } }),
      "test.run",
      {},
    )) as TestRunResult;
    assert.equal(r.exitCode, 3);
    assert.equal(r.tests, undefined);
  });

  it("go test (and pytest, cargo) in an image without them: ENOTFOUND naming the program and its image", async () => {
    const commands = detectCommands({
      files: new Map([["go.mod", Buffer.from("module x\n")]]),
      pythonTests: [],
      packages: new Set(),
    });
    assert.equal(commands.test?.command, "go test -json ./...");
    await assert.rejects(invokeTool(ctxWith(commands), "test.run", {}), (e) => {
      assert.ok(isAgentdError(e, "ENOTFOUND"), String(e));
      assert.match(e.message, /^go: command not found/);
      assert.match(e.message, /agentd-sandbox-go:latest/);
      assert.match(e.message, /`image: go` in \.agent\/config\.yaml/);
      return true;
    });
    // pytest is not in the base image either: Python's own "No module named pytest".
    await assert.rejects(
      invokeTool(
        ctxWith({ test: { command: "python3 -m pytest", source: "pytest.ini" } }),
        "test.run",
        {},
      ),
      (e) => {
        assert.ok(isAgentdError(e, "ENOTFOUND"), String(e));
        assert.match(e.message, /^pytest: Python module not found.*agentd-sandbox-python:latest/);
        return true;
      },
    );
    await assert.rejects(
      invokeTool(
        ctxWith({ lint: { command: "cargo clippy", source: "Cargo.toml" } }),
        "lint.run",
        {},
      ),
      /cargo: command not found.*agentd-sandbox-rust:latest/,
    );
  });
});
