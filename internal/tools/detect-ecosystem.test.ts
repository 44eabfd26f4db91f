/** Ecosystem detection: each ecosystem's files, polyglot repositories, hostile files. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { WorkspaceFacts } from "./detect-commands.ts";
import { detectEcosystem } from "./detect-ecosystem.ts";

function facts(files: Record<string, string>, pythonTests: string[] = []): WorkspaceFacts {
  return {
    files: new Map(Object.entries(files).map(([k, v]) => [k, Buffer.from(v)])),
    pythonTests,
    packages: new Set(),
  };
}

const pkg = (scripts: Record<string, string>) => JSON.stringify({ name: "x", scripts });

describe("detectEcosystem", () => {
  it("base for an empty workspace, naming what it looked for", () => {
    const d = detectEcosystem(facts({}));
    assert.equal(d.ecosystem, "base");
    assert.match(d.reason, /^no ecosystem's file \(go\.mod, Cargo\.toml, pom\.xml/);
  });

  it("each ecosystem by the file that decides, named in the reason", () => {
    const cases: [Record<string, string>, string, RegExp][] = [
      [{ "go.mod": "module m\n" }, "go", /^go\.mod \(test command: go\)$/],
      [{ "Cargo.toml": "[package]\n" }, "rust", /^Cargo\.toml \(test command: cargo\)$/],
      [{ "pom.xml": "<project/>" }, "java", /^pom\.xml \(test command: mvn\)$/],
      [{ "build.gradle.kts": "" }, "java", /^build\.gradle\.kts \(test command: gradle\)$/],
      [
        { gradlew: "#!/bin/sh\n", "build.gradle": "" },
        "java",
        /^gradlew \(test command: \.\/gradlew\)$/,
      ],
      [{ "pytest.ini": "[pytest]\n" }, "python", /^pytest\.ini \(test command: python3\)$/],
      [{ "pyproject.toml": "[project]\n" }, "python", /unittest \(test command: python3\)$/],
      [{ "requirements.txt": "requests\n" }, "python", /^requirements\.txt$/],
      [
        { "package.json": pkg({ test: "jest" }) },
        "node",
        /^package\.json scripts\.test \(test command: npm\)$/,
      ],
      [{ "package.json": pkg({}) }, "node", /^package\.json$/],
    ];
    for (const [files, ecosystem, reason] of cases) {
      const d = detectEcosystem(facts(files));
      assert.equal(d.ecosystem, ecosystem, JSON.stringify(files));
      assert.match(d.reason, reason, JSON.stringify(files));
    }
    const tests = detectEcosystem(facts({}, ["tests/test_a.py"]));
    assert.equal(tests.ecosystem, "python");
    assert.match(tests.reason, /tests\/test_a\.py/);
  });

  it("polyglot: the test command's source decides (npm before Python, Python before Go)", () => {
    const nodePy = facts({ "package.json": pkg({ test: "vitest" }), "pyproject.toml": "" });
    assert.equal(detectEcosystem(nodePy).ecosystem, "node");
    const pyGo = facts({ "pytest.ini": "", "go.mod": "module m\n" });
    assert.equal(detectEcosystem(pyGo).ecosystem, "python");
    // package.json without a test script gives no command: go.mod's `go test` decides.
    const goWeb = facts({ "package.json": pkg({ build: "vite" }), "go.mod": "module m\n" });
    assert.deepEqual(detectEcosystem(goWeb), {
      ecosystem: "go",
      reason: "go.mod (test command: go)",
    });
  });

  it("a command naming no toolchain (make, a script) falls back to the marker files", () => {
    const made = facts({ Makefile: "test:\n\tgo test ./...\n", "go.mod": "module m\n" });
    assert.equal(detectEcosystem(made).ecosystem, "go");
    const onlyMake = facts({ Makefile: "test:\n\t./t.sh\n" });
    assert.equal(detectEcosystem(onlyMake).ecosystem, "base");
    const script = facts({
      ".agent/config.yaml": "commands:\n  test: ./run-tests.sh\n",
      "Cargo.toml": "",
    });
    assert.deepEqual(detectEcosystem(script), { ecosystem: "rust", reason: "Cargo.toml" });
  });

  it("the config's test command decides by its program, after VAR= assignments", () => {
    const c = facts({
      ".agent/config.yaml": "commands:\n  test: CI=1 GOFLAGS=-count=1 go test ./...\n",
      "package.json": pkg({ test: "jest" }),
    });
    assert.deepEqual(detectEcosystem(c), {
      ecosystem: "go",
      reason: ".agent/config.yaml commands.test (test command: go)",
    });
  });

  it("hostile files: a broken config or package.json, binary junk, never a crash", () => {
    const broken = facts({ ".agent/config.yaml": "commands: [\n", "Cargo.toml": "" });
    assert.equal(detectEcosystem(broken).ecosystem, "rust", "the other files still decide");
    const junk = facts({ "package.json": "\u0000\uffff{", "go.mod": "\u0000" });
    assert.equal(detectEcosystem(junk).ecosystem, "go");
    const weird = facts({ ".agent/config.yaml": "commands:\n  test: '\u001b[2J rm -rf /'\n" });
    const d = detectEcosystem(weird);
    assert.equal(d.ecosystem, "base");
    assert.ok(!d.reason.includes("\u001b"), "no workspace text in the reason");
  });
});
