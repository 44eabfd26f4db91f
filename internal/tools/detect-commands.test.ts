/** Command detection from workspace files: each source, the order, and hostile files. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pickCommands, testCommandLine } from "./command-spec.ts";
import { detectCommands, type WorkspaceFacts } from "./detect-commands.ts";

function facts(
  files: Record<string, string>,
  pythonTests: string[] = [],
  packages: string[] = [],
): WorkspaceFacts {
  return {
    files: new Map(Object.entries(files).map(([k, v]) => [k, Buffer.from(v)])),
    pythonTests,
    packages: new Set(packages),
  };
}

const pkg = (scripts: Record<string, string>) => JSON.stringify({ name: "x", scripts });

describe("detectCommands", () => {
  it("finds nothing in an empty workspace", () => {
    assert.deepEqual(detectCommands(facts({})), {});
  });

  it("package.json: npm test and npm run lint; npm init's placeholder is no test", () => {
    const c = detectCommands(facts({ "package.json": pkg({ test: "node --test", lint: "x" }) }));
    assert.deepEqual(c.test, {
      command: "npm test",
      named: "npm test -- {name}",
      source: "package.json scripts.test",
    });
    assert.equal(c.lint?.command, "npm run lint");
    const placeholder = pkg({ test: 'echo "Error: no test specified" && exit 1' });
    assert.equal(detectCommands(facts({ "package.json": placeholder })).test, undefined);
  });

  it("package.json that is not JSON, or whose scripts are not strings, gives nothing", () => {
    for (const body of ["{", "null", "[]", '{"scripts":5}', '{"scripts":{"test":7}}'])
      assert.equal(detectCommands(facts({ "package.json": body })).test, undefined, body);
  });

  it("Python: pytest when configured, else unittest (from tests/ when it is no package)", () => {
    const py = detectCommands(facts({ "pyproject.toml": "[tool.pytest.ini_options]\n" }));
    assert.equal(py.test?.command, "python3 -m pytest");
    assert.equal(py.test?.source, "pyproject.toml [tool.pytest]");
    const ut = detectCommands(facts({}, ["tests/test_calc.py"]));
    assert.equal(ut.test?.command, "python3 -m unittest discover -s tests");
    assert.match(ut.test?.source ?? "", /tests\/test_calc\.py.*unittest/);
    const pkgTests = detectCommands(facts({}, ["tests/test_calc.py"], ["tests"]));
    assert.equal(pkgTests.test?.command, "python3 -m unittest discover");
    const root = detectCommands(facts({ "setup.py": "" }, ["test_a.py", "lib/b_test.py"]));
    assert.equal(root.test?.command, "python3 -m unittest discover");
    assert.equal(
      testCommandLine(ut.test as NonNullable<typeof ut.test>, "test_add"),
      "python3 -m unittest discover -s tests -k 'test_add'",
    );
  });

  it("Python lint: ruff, else flake8", () => {
    assert.equal(
      detectCommands(facts({ "pyproject.toml": "[tool.ruff]\n" })).lint?.command,
      "ruff check .",
    );
    assert.equal(detectCommands(facts({ ".flake8": "" })).lint?.command, "flake8");
  });

  it("go.mod, Cargo.toml", () => {
    const go = detectCommands(facts({ "go.mod": "module x\n" }));
    assert.deepEqual([go.test?.command, go.lint?.command], ["go test -json ./...", "go vet ./..."]);
    const rs = detectCommands(facts({ "Cargo.toml": "[package]\n" }));
    assert.deepEqual([rs.test?.command, rs.lint?.command], ["cargo test", "cargo clippy"]);
  });

  it("a Makefile's targets, never its variables or .PHONY line", () => {
    const mk = (body: string) => detectCommands(facts({ Makefile: body }));
    assert.equal(mk("all:\n\ttrue\ntest: all\n\t./run\n").test?.command, "make test");
    assert.equal(mk("build test: x\n").test?.source, "Makefile target test");
    assert.equal(mk("lint::\n\ttrue\n").lint?.command, "make lint");
    for (const body of [
      "test := 1\n",
      ".PHONY: test lint\n",
      "mytest:\n",
      "# test:\n",
      "\ttest:\n",
    ])
      assert.equal(mk(body).test, undefined, JSON.stringify(body));
    // GNU make's own order: GNUmakefile first.
    const both = detectCommands(facts({ GNUmakefile: "test:\n", Makefile: "lint:\n" }));
    assert.deepEqual([both.test?.source, both.lint], ["GNUmakefile target test", undefined]);
  });

  it("the first source that has a command wins, per command", () => {
    const c = detectCommands(
      facts({ "package.json": pkg({ test: "jest" }), Makefile: "test:\nlint:\n" }),
    );
    assert.deepEqual([c.test?.command, c.lint?.command], ["npm test", "make lint"]);
  });

  it(".agent/config.yaml comes first; a bad one is a problem naming the field, nothing runs", () => {
    const ok = detectCommands(
      facts({
        ".agent/config.yaml": "commands:\n  test: pytest -q {name}\n",
        "package.json": pkg({ test: "jest", lint: "eslint ." }),
      }),
    );
    assert.deepEqual(ok.test, {
      command: "pytest -q {name}",
      source: ".agent/config.yaml commands.test",
    });
    assert.equal(ok.lint?.command, "npm run lint");
    const cases: [string, RegExp][] = [
      ["commands:\n  test: 5\n", /\.agent\/config\.yaml: commands\.test: /],
      ["commands:\n  tset: x\n", /\.agent\/config\.yaml: commands: /],
      ["commands: [\n", /\.agent\/config\.yaml: not YAML/],
      ["commands:\n  test: ''\n", /commands\.test/],
      // A billion laughs: refused by the alias limit, not expanded.
      [
        `a: &a [x,x,x,x,x,x,x,x,x,x]\n${Array.from(
          { length: 12 },
          (_, i) =>
            `b${i}: &b${i} [${Array(10)
              .fill(i === 0 ? "*a" : `*b${i - 1}`)
              .join(",")}]`,
        ).join("\n")}\n`,
        /not YAML/,
      ],
    ];
    for (const [body, want] of cases) {
      const bad = detectCommands(
        facts({ ".agent/config.yaml": body, "package.json": pkg({ test: "jest" }) }),
      );
      assert.equal(bad.test, undefined, body);
      assert.match(bad.problem ?? "", want, body);
    }
  });
});

describe("pickCommands", () => {
  it("the policy's command wins; the workspace fills what it leaves unset", () => {
    const detected = detectCommands(facts({ "package.json": pkg({ test: "jest", lint: "x" }) }));
    const c = pickCommands({ test: "make check" }, detected);
    assert.deepEqual(c.test, { command: "make check", source: "policy tools.test" });
    assert.equal(c.lint?.source, "package.json scripts.lint");
  });

  it("a test name is always quoted, in every form", () => {
    const evil = "x'; touch pwned; echo '";
    const q = `'x'\\''; touch pwned; echo '\\'''`;
    assert.equal(testCommandLine({ command: "t", source: "" }, evil), `t ${q}`);
    assert.equal(testCommandLine({ command: "t {name} -v", source: "" }, evil), `t ${q} -v`);
    assert.equal(
      testCommandLine({ command: "npm test", named: "npm test -- {name}", source: "" }, evil),
      `npm test -- ${q}`,
    );
    assert.equal(testCommandLine({ command: "t {name}", source: "" }, undefined), "t ");
  });
});
