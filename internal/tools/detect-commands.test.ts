/** Command detection from workspace files: each source, the order, and hostile files. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pickCommands, testCommandLine } from "./command-spec.ts";
import { configImage, detectCommands, type WorkspaceFacts } from "./detect-commands.ts";

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

  it("Java: pom.xml → mvn -B test; else gradlew → ./gradlew test; else build.gradle(.kts) → gradle test", () => {
    assert.deepEqual(detectCommands(facts({ "pom.xml": "<project/>" })).test, {
      command: "mvn -B test",
      named: "mvn -B test -Dtest={name}",
      source: "pom.xml",
    });
    const both = facts({ "pom.xml": "<project/>", "build.gradle": "", gradlew: "#!/bin/sh" });
    assert.equal(detectCommands(both).test?.command, "mvn -B test", "Maven first");
    const wrapped = detectCommands(facts({ "build.gradle.kts": "", gradlew: "#!/bin/sh" }));
    assert.deepEqual([wrapped.test?.command, wrapped.test?.source], ["./gradlew test", "gradlew"]);
    assert.equal(wrapped.test?.named, "./gradlew test --tests {name}");
    for (const f of ["build.gradle", "build.gradle.kts"]) {
      const c = detectCommands(facts({ [f]: "plugins { id 'java' }" }));
      assert.deepEqual([c.test?.command, c.test?.source], ["gradle test", f]);
      assert.equal(c.lint, undefined);
    }
    const made = facts({ "pom.xml": "", Makefile: "test:\n\tmake-it\n" });
    assert.equal(detectCommands(made).test?.command, "mvn -B test", "before a Makefile");
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

describe("configImage (.agent/config.yaml image:)", () => {
  const cfg = (yaml: string) => configImage(Buffer.from(yaml));

  it("names an ecosystem, or nothing", () => {
    assert.deepEqual(configImage(undefined), {});
    assert.deepEqual(cfg("commands:\n  test: make check\n"), {});
    for (const e of ["python", "go", "rust", "java", "node", "base"])
      assert.deepEqual(cfg(`image: ${e}\n`), { ecosystem: e });
    assert.deepEqual(cfg("image: ' go '\n"), { ecosystem: "go" }, "surrounding blanks");
  });

  it("an image reference is no ecosystem: it is the run's own image, checked elsewhere", () => {
    for (const ref of [
      "python:3.12",
      "ghcr.io/acme/build:1",
      "agentd-sandbox-go:latest",
      `alpine@sha256:${"a".repeat(64)}`,
    ]) {
      assert.deepEqual(cfg(`image: "${ref}"\n`), {}, ref);
    }
    // A dotted name without `/`, `:` or `@` is neither: a problem naming the field.
    const dotted = cfg("image: python3.12\n");
    assert.ok("problem" in dotted);
    assert.match(dotted.problem, /^\.agent\/config\.yaml: image: unknown ecosystem "python3\.12"/);
    assert.match(dotted.problem, /python, go, rust, java, node, base, or an image reference/);
  });

  it("hostile values: wrong types, unknown names, control characters, huge strings", () => {
    const problems: [string, RegExp][] = [
      ["image: 5\n", /image: .*string/i],
      ["image: [go]\n", /image: .*string/i],
      ["image: {name: go}\n", /image: .*string/i],
      ["image: ''\n", /image: unknown ecosystem ""/],
      ["image: Go\n", /image: unknown ecosystem "Go"/],
      ["image: cobol\n", /image: unknown ecosystem "cobol"/],
      ['image: "go\\u001b[31m"\n', /image: unknown ecosystem "go\\u001b\[31m"/],
      [`image: ${"x".repeat(300)}\n`, /image: .*(256|too big|too long)/i],
      ["image: &a go\nother: *a\n", /^$/],
    ];
    for (const [yaml, want] of problems) {
      const r = cfg(yaml);
      if (want.source === "^$") {
        assert.deepEqual(r, { ecosystem: "go" }, "an anchor is fine");
        continue;
      }
      assert.ok("problem" in r, `${yaml}: ${JSON.stringify(r)}`);
      assert.match(r.problem, /^\.agent\/config\.yaml: /);
      assert.match(r.problem, want, yaml);
      assert.ok(!r.problem.includes("\u001b"), "no raw escape reaches a message");
    }
    const long = cfg(`image: ${"y".repeat(200)}\n`);
    assert.ok("problem" in long && long.problem.length < 400, "the value is cut in the message");
  });

  it("a bad image leaves the commands alone; a bad type is a problem of the whole file", () => {
    const ok = facts({ ".agent/config.yaml": "image: cobol\ncommands:\n  test: make check\n" });
    assert.equal(detectCommands(ok).test?.command, "make check");
    const bad = facts({ ".agent/config.yaml": "image: 7\ncommands:\n  test: make check\n" });
    assert.match(detectCommands(bad).problem ?? "", /^\.agent\/config\.yaml: image: /);
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
