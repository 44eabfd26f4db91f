/**
 * The test-output parsers on real output (fixtures/, see its README) and on hostile input:
 * huge, malformed, entity bombs, deep nesting, NUL bytes and terminal escapes.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { failureLine, testCountsText, testSummaryText } from "./format-summary.ts";
import { parseGoJson } from "./go-json.ts";
import { createGoJsonTextStream, goJsonText } from "./go-json-text.ts";
import { parseGoText } from "./go-text.ts";
import { parseJest } from "./jest.ts";
import { parseJunit } from "./junit.ts";
import { parseLibtest } from "./libtest.ts";
import { missingModule, missingProgram, missingProgramMessage } from "./missing-program.ts";
import { parseNodeSpec } from "./node-spec.ts";
import { parseTestOutput } from "./parse-test-output.ts";
import { parsePytest } from "./pytest.ts";
import { MAX_FAILURES, MAX_MESSAGE, type TestSummary } from "./summary.ts";
import { parseSurefire } from "./surefire.ts";
import { parseTap } from "./tap.ts";
import { parseUnittest } from "./unittest.ts";
import { parseVitest } from "./vitest.ts";
import { scanXml } from "./xml-scan.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
const counts = (s: TestSummary | undefined) =>
  s === undefined ? undefined : [s.passed, s.failed, s.skipped, s.errors];
const where = (s: TestSummary | undefined) =>
  s?.failures.map((f) => `${f.name}@${f.file}:${f.line}`);

describe("pytest", () => {
  for (const file of ["pytest-default.txt", "pytest-rA.txt", "pytest-q.txt"]) {
    it(`${file}: counts, each failure's nodeid, location and E-lines`, () => {
      const s = parsePytest(fixture(file));
      assert.deepEqual(counts(s), [1, 3, 1, 1]);
      assert.deepEqual(where(s)?.sort(), [
        "test_calc.py::TestThing::test_method_fails@test_calc.py:23",
        "test_calc.py::test_add_wrong@test_calc.py:11",
        "test_calc.py::test_error@test_calc.py:14",
        "test_calc.py::test_uses_broken@test_calc.py:27",
      ]);
      const wrong = s?.failures.find((f) => f.name.endsWith("test_add_wrong"));
      assert.match(wrong?.message ?? "", /^AssertionError: two and two\nassert 4 == 5/);
    });
  }
  it("no final line: not pytest's report", () => {
    assert.equal(parsePytest("collected 3 items\n"), undefined);
  });
});

describe("unittest", () => {
  for (const file of ["unittest-stderr.txt", "unittest-v-stderr.txt"]) {
    it(`${file}: counts from Ran/FAILED, the innermost frame, the last line`, () => {
      const s = parseUnittest(fixture(file));
      assert.deepEqual(counts(s), [1, 2, 1, 1]);
      assert.deepEqual(where(s), [
        "test_error (test_ut.CalcTest.test_error)@/tmp/fx/ut/tests/test_ut.py:11",
        "test_fail (test_ut.CalcTest.test_fail)@/tmp/fx/ut/tests/test_ut.py:8",
        "test_sub (test_ut.CalcTest.test_sub) (i=1)@/tmp/fx/ut/tests/test_ut.py:20",
      ]);
      assert.equal(s?.failures[1]?.message, "AssertionError: 2 != 3 : math is hard");
    });
  }
  it("OK (skipped=1)", () => {
    const s = parseUnittest("..s\n------\nRan 3 tests in 0.001s\n\nOK (skipped=1)\n");
    assert.deepEqual(counts(s), [2, 0, 1, 0]);
  });
});

describe("go test -json", () => {
  it("leaf tests counted, failures located, a package that does not build is an error", () => {
    const s = parseGoJson(fixture("go-test-json.txt"));
    assert.deepEqual(counts(s), [3, 3, 1, 1]);
    assert.deepEqual(where(s), [
      "TestAddWrong@calc_test.go:13",
      "TestTable/two@calc_test.go:23",
      "TestPanic@/tmp/fx/go/calc_test.go:31",
      "example.com/calc/broken@broken/b_test.go:5",
    ]);
    assert.equal(s?.failures[0]?.message, "Add(2, 2) = 4, want 5");
    assert.match(s?.failures[2]?.message ?? "", /^panic: assignment to entry in nil map/);
  });
  it("the text plain go test prints (failures only), whole or streamed in any chunking", () => {
    const json = fixture("go-test-json.txt");
    const text = goJsonText(json);
    assert.match(
      text,
      /^ {4}calc_test\.go:13: Add\(2, 2\) = 4, want 5\n--- FAIL: TestAddWrong \(0\.00s\)$/m,
    );
    assert.match(text, /^broken\/b_test\.go:5:28: undefined: undefined$/m);
    assert.match(text, /^ok {2}\texample\.com\/calc\/sub\t[\d.]+s$/m);
    assert.match(text, /^FAIL\texample\.com\/calc\t[\d.]+s$/m);
    assert.doesNotMatch(text, /"Action"|--- PASS|=== RUN|^PASS$/m, "no JSON, no passing test");
    const stream = createGoJsonTextStream();
    let streamed = "";
    for (let i = 0; i < json.length; i += 37) streamed += stream.push(json.slice(i, i + 37));
    streamed += stream.end();
    assert.equal(streamed, text);
  });
  it("a test that never ended shows all it printed; stray lines pass as they are", () => {
    const text = goJsonText(
      'go: downloading x\n{"Action":"output","Package":"p","Test":"TestHang","Output":"    h_test.go:3: waiting\\n"}\n',
    );
    assert.equal(text, "go: downloading x\n    h_test.go:3: waiting\n");
  });
});

describe("go test (text)", () => {
  const want = [
    "TestAddWrong@calc_test.go:13",
    "TestTable/two@calc_test.go:23",
    "TestPanic@/tmp/fx/go/calc_test.go:31",
    "example.com/calc/broken@broken/b_test.go:5",
  ];
  it("-v: the same results as -json", () => {
    const s = parseGoText(fixture("go-test-v.txt"));
    assert.deepEqual(counts(s), [3, 3, 1, 1]);
    assert.deepEqual(where(s), want);
    assert.deepEqual(s?.failures, parseGoJson(fixture("go-test-json.txt"))?.failures);
  });
  it("without -v: the failures (go prints no passing test)", () => {
    const s = parseGoText(fixture("go-test-text.txt"));
    assert.deepEqual(counts(s), [0, 3, 0, 1]);
    assert.deepEqual(where(s), want);
  });
  it("a package that fails with no failing test is an error", () => {
    const s = parseGoText(
      "panic in TestMain\nFAIL\texample.com/x\t0.01s\nok  \texample.com/y\t(cached)\n",
    );
    assert.deepEqual(counts(s), [0, 0, 0, 1]);
    assert.equal(s?.failures[0]?.name, "example.com/x");
  });
});

describe("cargo (libtest)", () => {
  it("counts, panics with location and message", () => {
    const s = parseLibtest(fixture("cargo-test.txt"));
    assert.deepEqual(counts(s), [1, 2, 1, 0]);
    assert.deepEqual(where(s), ["tests::adds_wrong@src/lib.rs:11", "tests::panics@src/lib.rs:18"]);
    assert.match(
      s?.failures[0]?.message ?? "",
      /^assertion `left == right` failed: two and two\n {2}left: 4/,
    );
  });
  it("summed over test binaries (--no-fail-fast)", () => {
    assert.deepEqual(counts(parseLibtest(fixture("cargo-no-fail-fast.txt"))), [2, 2, 1, 0]);
  });
  it("a crate that does not compile: an error at the first error's location", () => {
    const s = parseLibtest(fixture("cargo-compile-error.txt"));
    assert.deepEqual(counts(s), [0, 0, 0, 1]);
    assert.deepEqual(where(s), ["compile calc@src/lib.rs:8"]);
    assert.equal(s?.failures[0]?.message, "cannot find function `addd` in this scope");
  });
  it("the panic form before Rust 1.73", () => {
    const out =
      "test t::a ... FAILED\n\nfailures:\n\n---- t::a stdout ----\nthread 't::a' panicked at 'boom', src/x.rs:3:5\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n";
    assert.deepEqual(where(parseLibtest(out)), ["t::a@src/x.rs:3"]);
  });
});

describe("node --test", () => {
  it("spec (the default off a terminal): counts and the failing-tests section", () => {
    const s = parseNodeSpec(fixture("node24-spec.txt"));
    assert.deepEqual(counts(s), [2, 3, 2, 0]);
    assert.deepEqual(where(s), [
      "adds wrong@calc.test.js:5",
      "throws@calc.test.js:8",
      "inner fails@calc.test.js:11",
    ]);
    assert.equal(s?.failures[1]?.message, "TypeError: bad <thing>");
  });
  it("TAP: leaves counted, YAML location and error, the suite not a failure of its own", () => {
    const s = parseTap(fixture("node24-tap.txt"));
    assert.deepEqual(counts(s), [2, 3, 2, 0]);
    assert.deepEqual(where(s), [
      "adds wrong@/tmp/fx/node/calc.test.js:5",
      "throws@/tmp/fx/node/calc.test.js:8",
      "inner fails@/tmp/fx/node/calc.test.js:11",
    ]);
    assert.equal(s?.failures[0]?.message, "two and two\n\n4 !== 5");
  });
  it("plain TAP without summary comments", () => {
    const s = parseTap(
      "1..4\nok 1 - a\nnot ok 2 - b\nok 3 - c # SKIP no\nnot ok 4 - d # TODO later\nBail out! db down\n",
    );
    assert.deepEqual(counts(s), [1, 1, 2, 1]);
    assert.deepEqual(where(s), ["b@:0"]);
  });
});

describe("jest and vitest", () => {
  it("jest: the Tests line, each ● block with its message and the test file's frame", () => {
    const s = parseJest(fixture("jest30-stderr.txt"));
    assert.deepEqual(counts(s), [2, 2, 1, 0]);
    assert.deepEqual(where(s), [
      "calc › adds wrong@calc.test.js:4",
      "calc › throws@calc.test.js:6",
    ]);
    assert.equal(
      s?.failures[0]?.message,
      "expect(received).toBe(expected) // Object.is equality\n\nExpected: 5\nReceived: 4",
    );
  });
  it("jest: a suite that failed to run is an error at its own frame, never at jest's", () => {
    const s = parseJest(fixture("jest30-suite-error-stderr.txt"));
    assert.deepEqual(counts(s), [2, 2, 1, 2]);
    assert.deepEqual(where(s), [
      "calc › adds wrong@calc.test.js:4",
      "calc › throws@calc.test.js:6",
      "vt/calc.test.mjs@vt/calc.test.mjs:0",
      "broken.test.js@broken.test.js:1",
    ]);
    assert.match(s?.failures[3]?.message ?? "", /^Cannot find module '\.\/missing-module'/);
  });
  it("vitest: the Tests line and the FAIL blocks (stdout and stderr together)", () => {
    const s = parseVitest(`${fixture("vitest3-stdout.txt")}\n${fixture("vitest3-stderr.txt")}`);
    assert.deepEqual(counts(s), [1, 2, 1, 0]);
    assert.deepEqual(where(s), [
      "calc.test.mjs > calc > adds wrong@calc.test.mjs:5",
      "calc.test.mjs > calc > throws@calc.test.mjs:7",
    ]);
    assert.equal(
      s?.failures[0]?.message,
      "AssertionError: expected 4 to be 5 // Object.is equality",
    );
  });
  it("npm test picks whichever runner printed", () => {
    const jest = parseTestOutput({
      command: "npm test",
      stdout: "",
      stderr: fixture("jest30-stderr.txt"),
    });
    const vt = parseTestOutput({
      command: "npm test",
      stdout: fixture("vitest3-stdout.txt"),
      stderr: fixture("vitest3-stderr.txt"),
    });
    const spec = parseTestOutput({
      command: "npm test",
      stdout: fixture("node24-spec.txt"),
      stderr: "",
    });
    assert.deepEqual([jest?.format, vt?.format, spec?.format], ["jest", "vitest", "node-spec"]);
  });
});

describe("Maven console (Surefire), when no report could be read back", () => {
  it("Surefire 3: the aggregate counts, the Failures and Errors lists with their lines", () => {
    const s = parseSurefire(fixture("maven-surefire3.txt"));
    assert.deepEqual(counts(s), [1, 1, 1, 1]);
    assert.deepEqual(where(s), [
      "CalcTest.addsWrong@CalcTest.java:7",
      "CalcTest.throwsError@CalcTest.java:8",
    ]);
    assert.equal(s?.failures[0]?.message, "two and two expected:<5> but was:<4>");
  });
  it("Surefire 2: Failed tests and Tests in error", () => {
    const s = parseSurefire(fixture("maven-surefire2.txt"));
    assert.deepEqual(counts(s), [1, 1, 1, 1]);
    assert.deepEqual(where(s), ["ex.CalcTest.addsWrong@:0", "ex.CalcTest.throwsError@:0"]);
  });
  it("modules' aggregates are summed, per-class lines are not", () => {
    const out =
      "[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s <<< FAILURE! -- in a.T\n[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0\n[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 1\n";
    assert.deepEqual(counts(parseSurefire(out)), [3, 1, 1, 0]);
  });
});

describe("JUnit XML", () => {
  it("pytest's xunit2 (no file attribute): location from the failure text", () => {
    const s = parseJunit(fixture("junit-pytest.xml"));
    assert.deepEqual(counts(s), [1, 3, 1, 1]);
    assert.deepEqual(where(s), [
      "test_calc.test_add_wrong@test_calc.py:11",
      "test_calc.test_error@test_calc.py:14",
      "test_calc.TestThing.test_method_fails@test_calc.py:23",
      "test_calc.test_uses_broken@test_calc.py:27",
    ]);
    assert.equal(s?.failures[1]?.message, 'ValueError: boom <&> "quoted"');
  });
  it("xunit1 and several documents read back together", () => {
    const s = parseJunit(fixture("junit-pytest-xunit1.xml") + fixture("junit-pytest.xml"));
    assert.deepEqual(counts(s), [2, 6, 2, 2]);
  });
  it("a Java frame of the case's own class gives file and line", () => {
    const xml = `<testsuite name="ex.CalcTest" tests="1" failures="1"><testcase name="addsWrong" classname="ex.CalcTest"><failure message="expected:&lt;5&gt; but was:&lt;4&gt;" type="java.lang.AssertionError">java.lang.AssertionError: expected:&lt;5&gt; but was:&lt;4&gt;
	at org.junit.Assert.fail(Assert.java:89)
	at ex.CalcTest.addsWrong(CalcTest.java:7)
</failure></testcase></testsuite>`;
    const s = parseJunit(xml);
    assert.deepEqual(where(s), ["ex.CalcTest.addsWrong@CalcTest.java:7"]);
    assert.equal(s?.failures[0]?.message, "expected:<5> but was:<4>");
  });
  it("Maven Surefire (JUnit 4): failure, error, skip; the test's own frame", () => {
    const s = parseJunit(fixture("surefire-junit4.xml"));
    assert.deepEqual(counts(s), [1, 1, 1, 1]);
    assert.deepEqual(where(s)?.sort(), [
      "ex.CalcTest.addsWrong@CalcTest.java:7",
      "ex.CalcTest.throwsError@CalcTest.java:8",
    ]);
    assert.equal(s?.failures.find((f) => f.name.endsWith("throwsError"))?.message, "boom <&>");
  });
  it("suites without cases: their attributes", () => {
    assert.deepEqual(
      counts(parseJunit('<testsuite tests="5" failures="1" errors="1" skipped="1"/>')),
      [2, 1, 1, 1],
    );
  });
});

describe("hostile input", () => {
  it("billion laughs: entities are never defined or expanded", () => {
    const bomb = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><testsuite><testcase name="x"><failure message="&lol3;">&lol3;</failure></testcase></testsuite>`;
    const s = parseJunit(bomb);
    assert.deepEqual(counts(s), [0, 1, 0, 0]);
    assert.equal(s?.failures[0]?.message, "&lol3;");
  });
  it("external entities are not read", () => {
    const xxe = `<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><testsuite><testcase name="a"><failure message="&xxe;"/></testcase></testsuite>`;
    assert.equal(parseJunit(xxe)?.failures[0]?.message, "&xxe;");
  });
  it("deep nesting and many elements stay bounded", () => {
    const deep = `${"<a>".repeat(50_000)}<testcase name="deep"/>${"</a>".repeat(50_000)}<testsuite><testcase name="ok"/></testsuite>`;
    assert.deepEqual(counts(parseJunit(deep)), [1, 0, 0, 0]);
    const many = `<testsuite>${'<testcase name="t"/>'.repeat(200_000)}</testsuite>`;
    const s = parseJunit(many);
    assert.ok((s?.passed ?? 0) < 200_000 && (s?.passed ?? 0) > 90_000, "cut at the element bound");
  });
  it("malformed XML: what was read, never a throw", () => {
    for (const bad of [
      "<testsuite><testcase name='a'",
      "<<<<<<>>>>",
      '<testcase name="x"><failure>',
      "</x></y><testcase/>",
      '<testsuite><testcase name="a"></testsuite>',
    ])
      assert.doesNotThrow(() => parseJunit(bad));
    assert.equal(scanXml(`<${"<".repeat(200_000)}a>`).length, 1);
  });
  it("NUL bytes, ANSI escapes and control characters never reach a field", () => {
    const out =
      "\x1b[31mFAILED\x1b[0m t.py::test_a - boom\x00\x07 \x1b]0;title\x07bad\n\x1b[1m1 failed in 0.1s\x1b[0m\n";
    const s = parseTestOutput({ command: "pytest", stdout: out, stderr: "" });
    assert.deepEqual(counts(s), [0, 1, 0, 0]);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not be there
    assert.doesNotMatch(JSON.stringify(s?.failures), /[\x00-\x08\x0b-\x1f\x7f]|\\u00/);
    assert.equal(s?.failures[0]?.message, "boom bad");
  });
  it("a huge output: failures capped, the rest counted, messages cut", () => {
    const lines = Array.from(
      { length: 5000 },
      (_, i) => `FAILED t.py::test_${i} - ${"x".repeat(5000)}`,
    );
    const s = parsePytest(`${lines.join("\n")}\n5000 failed in 1.0s\n`);
    assert.equal(s?.failed, 5000);
    assert.equal(s?.failures.length, MAX_FAILURES);
    assert.equal(s?.moreFailures, 5000 - MAX_FAILURES);
    assert.ok((s?.failures[0]?.message.length ?? 0) <= MAX_MESSAGE);
  });
  it("claims past uint32 or negative are clamped; garbage is no summary", () => {
    const s = parseLibtest(
      "test result: ok. 99999999999999 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
    );
    assert.equal(s?.passed, 0xffff_ffff);
    for (const junk of ["", "\x00\x00", "{".repeat(10_000), "random words\nok\n"])
      assert.equal(
        parseTestOutput({ command: "make test", stdout: junk, stderr: junk }),
        undefined,
      );
  });
  it("every parser reads pathological lines (long runs of its own markers) without blowing up", () => {
    const big = 2 * 1024 * 1024;
    const inputs = [
      "= ".repeat(big / 2),
      `${"_".repeat(big / 2)} x`,
      `___ ${"_ ".repeat(big / 4)}`,
      "1 passed".repeat(big / 8),
      `${"test result: ok. 1 passed; ".repeat(big / 32)}\n`,
      `  ● ${"x".repeat(big)}\n`,
      `${"not ok 1 - x\n  ---\n  error: |\n".repeat(big / 32)}`,
      `${"<a ".repeat(big / 3)}>`,
      `${"<testcase><failure>".repeat(big / 20)}`,
      `${"--- FAIL: T (0s)\n".repeat(big / 20)}`,
      "\x1b[".repeat(big / 2),
    ];
    const parsers = [
      parsePytest,
      parseUnittest,
      parseGoJson,
      parseGoText,
      parseLibtest,
      parseTap,
      parseNodeSpec,
      parseJest,
      parseVitest,
      parseSurefire,
      parseJunit,
    ];
    for (const input of inputs)
      for (const parse of parsers) {
        const s = parse(input);
        assert.ok(s === undefined || s.failures.length <= MAX_FAILURES);
      }
  });
  it("runs of blank lines, of a count's digits and of an attribute-less tag read in one pass (no regex retried at every line)", () => {
    // Each of these took hours at 1 MiB before (a /m regex whose ^\s* or .*\d+ re-scanned
    // the rest of the input from every line; the XML attribute regex from every character):
    // the test's timeout is what fails.
    const big = 1024 * 1024;
    const inputs = [
      "\n".repeat(big),
      " \n".repeat(big / 2),
      "\t\n".repeat(big / 2),
      `Test Suites: 1\nTests: ${"1".repeat(big)}`,
      `<testsuite><testcase ${"a".repeat(big)}></testcase></testsuite>`,
    ];
    for (const input of inputs) {
      for (const command of ["", "npm test", "go test ./...", "npx vitest", "prove"]) {
        const s = parseTestOutput({ command, stdout: input, stderr: input });
        assert.ok(s === undefined || s.failures.length <= MAX_FAILURES);
      }
    }
    const junit = parseJunit(
      `<testsuite><testcase ${"a".repeat(big)} name="t"></testcase></testsuite>`,
    );
    assert.equal(junit?.passed, 1);
  });
  it("go -json events of the wrong types are skipped", () => {
    const s = parseGoJson(
      '{"Action":5,"Test":[]}\n{"Action":"fail","Package":"p","Test":"T"}\nnull\n[1]\n',
    );
    assert.deepEqual(counts(s), [0, 1, 0, 0]);
  });
});

describe("picking the format", () => {
  it("by the command's words, then by sniffing", () => {
    const tap = fixture("node24-tap.txt");
    assert.equal(parseTestOutput({ command: "npm test", stdout: tap, stderr: "" })?.format, "tap");
    const ut = fixture("unittest-stderr.txt");
    assert.equal(
      parseTestOutput({ command: "make test", stdout: "", stderr: ut })?.format,
      "unittest",
    );
    const go = fixture("go-test-json.txt");
    assert.equal(
      parseTestOutput({ command: "go test -json ./...", stdout: go, stderr: "" })?.format,
      "go-json",
    );
  });
  it("/workspace/ paths are shown relative", () => {
    const ut = fixture("unittest-stderr.txt").replaceAll("/tmp/fx/ut/", "/workspace/");
    const s = parseTestOutput({ command: "python3 -m unittest", stdout: "", stderr: ut });
    assert.equal(s?.failures[0]?.file, "tests/test_ut.py");
  });
});

describe("exit 127", () => {
  it("names the program from the shell's words, and its image", () => {
    for (const [stderr, program] of [
      ["sh: 1: go: not found\n", "go"],
      ["/bin/sh: 1: cargo: not found\n", "cargo"],
      ["bash: line 1: mvn: command not found\n", "mvn"],
      ["bash: pnpm: command not found\n", "pnpm"],
      ["env: 'node': No such file or directory\n", "node"],
    ])
      assert.equal(missingProgram("x", stderr as string).program, program);
    assert.deepEqual(missingProgram("go test ./...", "sh: 1: go: not found"), {
      program: "go",
      ecosystem: "go",
      image: "agentd-sandbox-go:latest",
    });
    assert.equal(missingProgram("./gradlew test", "").image, "agentd-sandbox-java:latest");
    assert.equal(
      missingProgram("CI=1 python3 -m pytest", "").image,
      "agentd-sandbox-python:latest",
    );
  });
  it("python3 -m pytest without pytest: the module is the missing program", () => {
    const stderr = "/usr/bin/python3: No module named pytest\n";
    const m = missingModule("python3 -m pytest -k 'x'", stderr);
    assert.deepEqual(m, {
      program: "pytest",
      module: true,
      ecosystem: "python",
      image: "agentd-sandbox-python:latest",
    });
    assert.match(
      missingProgramMessage("test.run", "python3 -m pytest", m as NonNullable<typeof m>),
      /^pytest: Python module not found .*`image: python`/,
    );
    // A test's own failed import, or a module the command does not run, is not it.
    assert.equal(
      missingModule("python3 -m pytest", "ModuleNotFoundError: No module named 'requests'\n"),
      undefined,
    );
    assert.equal(missingModule("python3 -m unittest", stderr), undefined);
    assert.equal(missingModule("python3 -m pytestx", stderr), undefined);
  });
  it("the message says how to pick the image; an unknown program gets the setup advice", () => {
    const go = missingProgramMessage(
      "test.run",
      "go test ./...",
      missingProgram("go test ./...", "sh: 1: go: not found"),
    );
    assert.match(go, /^go: command not found/);
    assert.match(go, /agentd-sandbox-go:latest/);
    assert.match(go, /`image: go` in \.agent\/config\.yaml/);
    const jest = missingProgramMessage(
      "test.run",
      "npm test",
      missingProgram("npm test", "sh: 1: jest: not found"),
    );
    assert.match(jest, /^jest: command not found/);
    assert.match(jest, /commands\.setup/);
    const esc = missingProgram("x", "sh: 1: \x1b[31mevil\x1b[0m: not found").program;
    assert.ok(!esc.includes("\x1b"));
  });
});

describe("formatting", () => {
  it("counts and failure lines", () => {
    const s = parsePytest(fixture("pytest-default.txt")) as TestSummary;
    assert.equal(testCountsText(s), "3 failed, 1 error, 1 passed, 1 skipped");
    assert.equal(
      failureLine(s.failures[0] as TestSummary["failures"][number]),
      "test_calc.py::test_add_wrong (test_calc.py:11): AssertionError: two and two",
    );
    assert.equal(
      testCountsText({ ...s, passed: 0, failed: 0, skipped: 0, errors: 0 }),
      "no tests ran",
    );
    const text = testSummaryText(s);
    assert.match(
      text,
      /^Test results \(pytest\): 3 failed, 1 error, 1 passed, 1 skipped\nFAILED test_calc\.py::test_add_wrong at test_calc\.py:11\n {4}AssertionError: two and two/,
    );
  });
  it("control characters from an event never reach the text", () => {
    const line = failureLine({
      name: "a\x1b[2Jb",
      file: "f\x00.py",
      line: 3,
      message: "m\x07\nsecond",
    });
    assert.equal(line, "ab (f.py:3): m");
  });
});
