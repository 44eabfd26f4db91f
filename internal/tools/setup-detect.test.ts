/**
 * The setup step's command: detected from each lockfile or manifest (with the file that keys
 * the cache), configured in `.agent/config.yaml` (hostile values refused naming the field),
 * and the policy's tools.setup over both.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pickCommands } from "./command-spec.ts";
import { detectCommands } from "./detect-commands.ts";
import { detectSetup, GO_SETUP } from "./setup-detect.ts";

const files = (f: Record<string, string>) =>
  new Map(Object.entries(f).map(([k, v]) => [k, Buffer.from(v)]));
const facts = (f: Record<string, string>) => ({
  files: files(f),
  pythonTests: [],
  packages: new Set<string>(),
});

describe("detectSetup", () => {
  const cases: [Record<string, string>, string, string, string, boolean][] = [
    [
      { "package.json": "{}", "package-lock.json": "{}" },
      "npm ci",
      "npm",
      "package-lock.json",
      true,
    ],
    [{ "npm-shrinkwrap.json": "{}" }, "npm ci", "npm", "npm-shrinkwrap.json", true],
    [{ "pnpm-lock.yaml": "" }, "pnpm install --frozen-lockfile", "npm", "pnpm-lock.yaml", true],
    [
      { "yarn.lock": "# yarn lockfile v1\n" },
      "yarn install --frozen-lockfile",
      "npm",
      "yarn.lock",
      true,
    ],
    [
      { "yarn.lock": "__metadata:\n  version: 8\n" },
      "yarn install --immutable",
      "npm",
      "yarn.lock",
      false,
    ],
    [{ "yarn.lock": "", ".yarnrc.yml": "" }, "yarn install --immutable", "npm", "yarn.lock", false],
    [
      { "requirements.txt": "six==1.16.0\n", "pyproject.toml": "" },
      "python3 -m pip install --user -r requirements.txt",
      "pypi",
      "requirements.txt",
      true,
    ],
    [
      { "pyproject.toml": "" },
      "python3 -m pip install --user -e .",
      "pypi",
      "pyproject.toml",
      false,
    ],
    [{ "setup.py": "" }, "python3 -m pip install --user -e .", "pypi", "setup.py", false],
    [{ "go.mod": "", "go.sum": "" }, GO_SETUP, "go", "go.sum", true],
    [{ "go.mod": "" }, GO_SETUP, "go", "go.mod", false],
    [{ "Cargo.toml": "", "Cargo.lock": "" }, "cargo fetch", "cargo", "Cargo.lock", true],
    [{ "pom.xml": "" }, "mvn -B dependency:go-offline", "maven", "pom.xml", true],
    [
      { "build.gradle.kts": "", gradlew: "" },
      "sh ./gradlew --no-daemon dependencies",
      "gradle",
      "build.gradle.kts",
      false,
    ],
    [{ "build.gradle": "" }, "gradle --no-daemon dependencies", "gradle", "build.gradle", false],
  ];
  it("Go's setup downloads the modules, then compiles the tests without running them, and never fails on a package that does not compile", () => {
    assert.match(GO_SETUP, /^go mod download && \{ go test /);
    assert.match(GO_SETUP, / -exec true /, "the test binaries are not run: /bin/true is");
    assert.match(GO_SETUP, / -count=1 /, "no test result is cached");
    assert.match(GO_SETUP, /\|\| true; \}$/);
  });
  for (const [f, command, ecosystem, lockfile, inCache] of cases)
    it(`${Object.keys(f).join(" + ")} → ${command}${inCache ? " (outcome in the cache)" : ""}`, () => {
      const s = detectSetup(files(f));
      const warm = command === "npm ci" ? { warm: "npm install --no-save --prefer-offline" } : {};
      const flag = inCache ? { outcomeInCache: true } : {};
      assert.deepEqual(s, { command, ecosystem, lockfile, source: lockfile, ...flag, ...warm });
      assert.deepEqual(detectCommands(facts(f)).setup, s);
    });

  it("a line reading files the key does not digest is not marked as having its outcome in the cache", () => {
    const req = (text: string) =>
      detectSetup(files({ "requirements.txt": text }))?.outcomeInCache === true;
    assert.equal(
      req("# pinned\nsix==1.17.0\npytest >= 8 ; python_version > '3.8'\nfoo[bar]\n"),
      true,
    );
    for (const bad of [
      "-r base.txt\n",
      "-c constraints.txt\nsix\n",
      "-e .\n",
      ".\n",
      "./libs/x\n",
      "--index-url https://example.test/simple\nsix\n",
      "six @ https://example.test/six.whl\n",
      "six @ file:///tmp/six\n",
      "/abs/path.whl\n",
    ])
      assert.equal(req(bad), false, JSON.stringify(bad));
    const cargo = (toml: string) =>
      detectSetup(files({ "Cargo.toml": toml, "Cargo.lock": "" }))?.outcomeInCache === true;
    assert.equal(cargo('[package]\nname = "x"\n[dependencies]\nserde = "1"\n'), true);
    assert.equal(cargo('[workspace]\nmembers = ["a"]\n'), false);
    assert.equal(cargo('[dependencies]\nlocal = { path = "../local" }\n'), false);
    const pom = (xml: string) => detectSetup(files({ "pom.xml": xml }))?.outcomeInCache === true;
    assert.equal(pom("<project><modules><module>a</module></modules></project>"), false);
    assert.equal(pom("<project><parent><artifactId>p</artifactId></parent></project>"), false);
  });

  it("no lockfile, no setup: a bare package.json would resolve versions anew each run", () => {
    assert.equal(detectSetup(files({ "package.json": "{}" })), undefined);
    assert.equal(detectCommands(facts({})).setup, undefined);
  });

  it("a lockfile's text never reaches the line", () => {
    const s = detectSetup(files({ "yarn.lock": "__metadata:\n$(touch /tmp/x); `id`\n" }));
    assert.equal(s?.command, "yarn install --immutable");
  });
});

describe("commands.setup in .agent/config.yaml", () => {
  const cfg = (yaml: string, more: Record<string, string> = {}) =>
    detectCommands(facts({ ".agent/config.yaml": yaml, ...more }));

  it("wins over detection, keeping the detected cache key", () => {
    const c = cfg("commands:\n  setup: npm ci --ignore-scripts\n", { "package-lock.json": "{}" });
    assert.deepEqual(c.setup, {
      command: "npm ci --ignore-scripts",
      source: ".agent/config.yaml commands.setup",
      ecosystem: "npm",
      lockfile: "package-lock.json",
    });
    const custom = cfg("commands:\n  setup: make deps\n");
    assert.equal(custom.setup?.ecosystem, "custom");
    assert.equal(custom.setup?.lockfile, "");
  });

  it("hostile values are refused naming the field", () => {
    const bad: [string, RegExp][] = [
      ['commands:\n  setup: ""\n', /commands\.setup/],
      ['commands:\n  setup: "   "\n', /commands\.setup: must not be blank/],
      ['commands:\n  setup: "a\\0b"\n', /commands\.setup: must not contain a NUL byte/],
      ["commands:\n  setup: 5\n", /commands\.setup/],
      ["commands:\n  setup: [npm, ci]\n", /commands\.setup/],
      ["commands:\n  setup: { cmd: x }\n", /commands\.setup/],
      [`commands:\n  setup: "${"x".repeat(64 * 1024 + 1)}"\n`, /commands\.setup/],
      ["commands:\n  setpu: npm ci\n", /commands/],
    ];
    for (const [yaml, re] of bad) {
      const c = cfg(yaml, { "package-lock.json": "{}" });
      assert.match(c.problem ?? "", re, yaml.slice(0, 60));
      assert.equal(c.setup, undefined, "a bad config runs no setup at all");
    }
  });
});

describe("pickCommands", () => {
  it("the policy's tools.setup wins and keeps the detected key", () => {
    const detected = detectCommands(facts({ "Cargo.lock": "", "Cargo.toml": "" }));
    const c = pickCommands({ setup: "cargo fetch --locked" }, detected);
    assert.deepEqual(c.setup, {
      command: "cargo fetch --locked",
      source: "policy tools.setup",
      ecosystem: "cargo",
      lockfile: "Cargo.lock",
    });
    assert.equal(pickCommands({}, detected).setup?.command, "cargo fetch");
    assert.equal(pickCommands({}, {}).setup, undefined);
  });
});
