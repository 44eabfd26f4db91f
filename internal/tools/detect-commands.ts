/**
 * test.run's, lint.run's and setup.run's commands from the uploaded workspace, for a policy
 * that sets none. The setup step: `.agent/config.yaml` commands.setup, else the lockfile or
 * manifest (setup-detect.ts). Test and lint are looked for in this order, the first that
 * has it wins:
 *
 *   1. `.agent/config.yaml`: `commands: { test: "…", lint: "…", setup: "…" }` (`{name}` as in policy)
 *   2. package.json: `scripts.test` → `npm test`, `scripts.lint` → `npm run lint`
 *   3. Python: pytest configured (pytest.ini, conftest.py, `[tool.pytest…]` in
 *      pyproject.toml, `[tool:pytest]` in setup.cfg, `[pytest]` in tox.ini) →
 *      `python3 -m pytest`; else a Python project or test files → `python3 -m unittest
 *      discover` (from `tests/` or `test/` when that folder is not a package). Lint: ruff
 *      (ruff.toml, .ruff.toml, `[tool.ruff]`) → `ruff check .`; flake8 (.flake8, a
 *      `[flake8]` section) → `flake8`.
 *   4. go.mod → `go test -json ./...` (shown as text, see test-results/go-json-text.ts), `go vet ./...`
 *   5. Cargo.toml → `cargo test`, `cargo clippy`
 *   6. Java: pom.xml → `mvn -B test`; else gradlew → `./gradlew test`; else build.gradle
 *      or build.gradle.kts → `gradle test`
 *   7. a Makefile with a `test:` / `lint:` target → `make test` / `make lint`
 *
 * `.agent/config.yaml` may also name the run's image, `image: <ecosystem>` (python, go,
 * rust, java, node, base): checked by configImage (the worker's run-image.ts uses it).
 *
 * Pure: reads only what it is given (root-level files and the paths of Python test files,
 * collected by workspace-config.ts from the archive uploaded at CreateRun — never from the
 * live sandbox, so a run cannot change its own test command). Must never: return a line
 * built from workspace text other than `.agent/config.yaml`'s commands (a package.json
 * script is run by npm, never spliced into a line).
 */
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type { CommandSpec, RunCommands, SetupSpec } from "./command-spec.ts";
import { detectSetup, SETUP_FILES } from "./setup-detect.ts";

/** The workspace's own config file for agentd (documented in docs/policy.md). */
export const WORKSPACE_CONFIG_FILE = ".agent/config.yaml";

/** Root-level files detection reads (besides WORKSPACE_CONFIG_FILE). */
export const DETECTION_FILES: readonly string[] = [
  ...SETUP_FILES,
  WORKSPACE_CONFIG_FILE,
  "package.json",
  "pyproject.toml",
  "setup.cfg",
  "setup.py",
  "tox.ini",
  "pytest.ini",
  "conftest.py",
  "ruff.toml",
  ".ruff.toml",
  ".flake8",
  "requirements.txt",
  "Pipfile",
  "go.mod",
  "Cargo.toml",
  "pom.xml",
  "build.gradle",
  "build.gradle.kts",
  "gradlew",
  "GNUmakefile",
  "makefile",
  "Makefile",
].filter((f, i, all) => all.indexOf(f) === i);

/** What detection looks at. */
export interface WorkspaceFacts {
  /** DETECTION_FILES present in the workspace, by path (regular files). */
  files: ReadonlyMap<string, Buffer>;
  /** Paths of Python test files (test_*.py, *_test.py), as many as were collected. */
  pythonTests: readonly string[];
  /** Folders holding an __init__.py. */
  packages: ReadonlySet<string>;
}

/** The placeholder `npm init` writes: not a test command. */
const NPM_PLACEHOLDER = /no test specified/;

/** The ecosystems of the language images (sandbox-images/NAME), and base. */
export const ECOSYSTEMS = ["python", "go", "rust", "java", "node", "base"] as const;
export type Ecosystem = (typeof ECOSYSTEMS)[number];

const ConfigSchema = z
  .object({
    /** The run's image by ecosystem (configImage checks the value). */
    image: z.string().max(256).optional(),
    commands: z
      .object({
        test: z
          .string()
          .min(1)
          .max(64 * 1024)
          .optional(),
        lint: z
          .string()
          .min(1)
          .max(64 * 1024)
          .optional(),
        setup: z
          .string()
          .min(1)
          .max(64 * 1024)
          .refine((s) => s.trim() !== "", "must not be blank")
          .refine((s) => !s.includes("\0"), "must not contain a NUL byte")
          .optional(),
      })
      .strict()
      .optional(),
  })
  .loose();

export function detectCommands(facts: WorkspaceFacts): RunCommands {
  const fromConfig = configCommands(facts.files.get(WORKSPACE_CONFIG_FILE), facts.files);
  if ("problem" in fromConfig) return { problem: fromConfig.problem };
  const finders = [
    () => fromConfig,
    npmCommands,
    pythonCommands,
    goCommands,
    cargoCommands,
    javaCommands,
  ];
  const out: RunCommands = {};
  for (const find of [...finders, makeCommands]) {
    const found = find(facts);
    out.test ??= found.test;
    out.lint ??= found.lint;
  }
  if (out.test === undefined) delete out.test;
  if (out.lint === undefined) delete out.lint;
  const setup = fromConfig.setup ?? detectSetup(facts.files);
  if (setup !== undefined) out.setup = setup;
  const npmScripts = packageScripts(facts);
  if (npmScripts !== undefined) out.npmScripts = npmScripts;
  return out;
}

/** The uploaded package.json's string scripts, if it has any. */
function packageScripts(facts: WorkspaceFacts): Record<string, string> | undefined {
  const data = facts.files.get("package.json");
  if (data === undefined) return undefined;
  try {
    const doc = JSON.parse(data.toString("utf8")) as { scripts?: unknown };
    if (doc === null || typeof doc.scripts !== "object" || doc.scripts === null) return undefined;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(doc.scripts)) if (typeof v === "string") out[k] = v;
    return out;
  } catch {
    return undefined;
  }
}

type Found = {
  test?: CommandSpec | undefined;
  lint?: CommandSpec | undefined;
  setup?: SetupSpec | undefined;
};

type WorkspaceConfigDoc = z.output<typeof ConfigSchema>;

/** `.agent/config.yaml` parsed and checked; a problem names the field. */
export function parseWorkspaceConfig(
  data: Buffer | undefined,
): { config: WorkspaceConfigDoc } | { problem: string } {
  if (data === undefined) return { config: {} };
  let doc: unknown;
  try {
    doc = parseYaml(data.toString("utf8"), { maxAliasCount: 10 }) ?? {};
  } catch (err) {
    return {
      problem: `${WORKSPACE_CONFIG_FILE}: not YAML (${(err as Error).message.split("\n")[0]})`,
    };
  }
  const parsed = ConfigSchema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join(".") || "(top level)";
    return { problem: `${WORKSPACE_CONFIG_FILE}: ${field}: ${issue?.message ?? "invalid"}` };
  }
  return { config: parsed.data };
}

/**
 * `.agent/config.yaml`'s `image:`: an ecosystem's image, nothing (no file, no field), or a
 * problem that names the field. An image reference (registry/name:tag, a digest: it has a
 * `/`, `:` or `@`) is not an ecosystem: it is the run's own image (worker/requested-image.ts),
 * checked against the policy there, so it is nothing here. The value is quoted and cut in
 * messages (it is the workspace's text).
 */
export function configImage(
  data: Buffer | undefined,
): { ecosystem?: Ecosystem } | { problem: string } {
  const parsed = parseWorkspaceConfig(data);
  if ("problem" in parsed) return parsed;
  const v = parsed.config.image;
  if (v === undefined) return {};
  const name = v.trim();
  if ((ECOSYSTEMS as readonly string[]).includes(name)) return { ecosystem: name as Ecosystem };
  if (/[/:@]/.test(name)) return {};
  return ecosystemProblem(`${WORKSPACE_CONFIG_FILE}: image`, v);
}

/** An image name that is neither an ecosystem nor a reference, as a problem naming `field`. */
export function ecosystemProblem(field: string, v: string): { problem: string } {
  const shown = JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);
  const expected = `expected one of ${ECOSYSTEMS.join(", ")}, or an image reference (registry/name:tag)`;
  return { problem: `${field}: unknown ecosystem ${shown}; ${expected}` };
}

function configCommands(
  data: Buffer | undefined,
  files: WorkspaceFacts["files"],
): Found | { problem: string } {
  const parsed = parseWorkspaceConfig(data);
  if ("problem" in parsed) return parsed;
  const c = parsed.config.commands ?? {};
  const source = (k: string) => `${WORKSPACE_CONFIG_FILE} commands.${k}`;
  // A configured setup keeps the detected cache key: the lockfile still says what it fetches.
  const keyed = detectSetup(files);
  return {
    test: c.test === undefined ? undefined : { command: c.test, source: source("test") },
    lint: c.lint === undefined ? undefined : { command: c.lint, source: source("lint") },
    setup:
      c.setup === undefined
        ? undefined
        : {
            command: c.setup,
            source: source("setup"),
            ecosystem: keyed?.ecosystem ?? "custom",
            lockfile: keyed?.lockfile ?? "",
          },
  };
}

function npmCommands(facts: WorkspaceFacts): Found {
  const data = facts.files.get("package.json");
  if (data === undefined) return {};
  let scripts: Record<string, unknown> = {};
  try {
    const doc = JSON.parse(data.toString("utf8")) as { scripts?: unknown };
    if (doc !== null && typeof doc.scripts === "object" && doc.scripts !== null)
      scripts = doc.scripts as Record<string, unknown>;
  } catch {
    return {}; // npm itself would refuse it: nothing to run
  }
  const has = (k: string) => typeof scripts[k] === "string" && (scripts[k] as string).trim() !== "";
  return {
    test:
      has("test") && !NPM_PLACEHOLDER.test(scripts.test as string)
        ? { command: "npm test", named: "npm test -- {name}", source: "package.json scripts.test" }
        : undefined,
    lint: has("lint")
      ? { command: "npm run lint", source: "package.json scripts.lint" }
      : undefined,
  };
}

function text(facts: WorkspaceFacts, path: string): string {
  return facts.files.get(path)?.toString("utf8") ?? "";
}

function pythonCommands(facts: WorkspaceFacts): Found {
  const pyproject = text(facts, "pyproject.toml");
  const setupCfg = text(facts, "setup.cfg");
  const tox = text(facts, "tox.ini");
  const has = (p: string) => facts.files.has(p);
  const pytest =
    (has("pytest.ini") && "pytest.ini") ||
    (has("conftest.py") && "conftest.py") ||
    (/^\[tool\.pytest/m.test(pyproject) && "pyproject.toml [tool.pytest]") ||
    (/^\[tool:pytest\]/m.test(setupCfg) && "setup.cfg [tool:pytest]") ||
    (/^\[pytest\]/m.test(tox) && "tox.ini [pytest]");
  const project =
    has("pyproject.toml") || has("setup.py") || has("setup.cfg") || facts.pythonTests.length > 0;
  let test: CommandSpec | undefined;
  if (pytest)
    test = { command: "python3 -m pytest", named: "python3 -m pytest -k {name}", source: pytest };
  else if (project) test = unittestCommand(facts);
  const ruff =
    (has("ruff.toml") && "ruff.toml") ||
    (has(".ruff.toml") && ".ruff.toml") ||
    (/^\[tool\.ruff/m.test(pyproject) && "pyproject.toml [tool.ruff]");
  const flake8 =
    (has(".flake8") && ".flake8") ||
    (/^\[flake8\]/m.test(setupCfg) && "setup.cfg [flake8]") ||
    (/^\[flake8\]/m.test(tox) && "tox.ini [flake8]");
  const lint: CommandSpec | undefined = ruff
    ? { command: "ruff check .", source: ruff }
    : flake8
      ? { command: "flake8", source: flake8 }
      : undefined;
  return { test, lint };
}

/**
 * unittest discovery from the workspace, or from `tests/` (or `test/`) when every test file
 * is under that folder and it is not a package: discovery only walks into packages.
 */
function unittestCommand(facts: WorkspaceFacts): CommandSpec {
  const source =
    facts.pythonTests.length > 0
      ? `Python test files (${facts.pythonTests[0]}${facts.pythonTests.length > 1 ? ", …" : ""}), unittest`
      : "a Python project (pyproject.toml, setup.py or setup.cfg), unittest";
  const dirs = new Set(facts.pythonTests.map((p) => (p.includes("/") ? p.split("/")[0] : ".")));
  const [only] = dirs;
  const start =
    dirs.size === 1 && (only === "tests" || only === "test") && !facts.packages.has(only)
      ? ` -s ${only}`
      : "";
  const command = `python3 -m unittest discover${start}`;
  return { command, named: `${command} -k {name}`, source };
}

function goCommands(facts: WorkspaceFacts): Found {
  if (!facts.files.has("go.mod")) return {};
  return {
    // -json: test.run reads the results from the events and shows their text (go-json-text.ts).
    test: {
      command: "go test -json ./...",
      named: "go test -json ./... -run {name}",
      source: "go.mod",
      output: "go-json",
    },
    lint: { command: "go vet ./...", source: "go.mod" },
  };
}

function cargoCommands(facts: WorkspaceFacts): Found {
  if (!facts.files.has("Cargo.toml")) return {};
  return {
    test: { command: "cargo test", source: "Cargo.toml" },
    lint: { command: "cargo clippy", source: "Cargo.toml" },
  };
}

function javaCommands(facts: WorkspaceFacts): Found {
  if (facts.files.has("pom.xml"))
    return {
      test: { command: "mvn -B test", named: "mvn -B test -Dtest={name}", source: "pom.xml" },
    };
  // The wrapper pins the project's Gradle; it is a POSIX sh script at the root.
  if (facts.files.has("gradlew"))
    return {
      test: {
        command: "./gradlew test",
        named: "./gradlew test --tests {name}",
        source: "gradlew",
      },
    };
  const build = ["build.gradle", "build.gradle.kts"].find((n) => facts.files.has(n));
  if (build === undefined) return {};
  return { test: { command: "gradle test", named: "gradle test --tests {name}", source: build } };
}

function makeCommands(facts: WorkspaceFacts): Found {
  // GNU make reads GNUmakefile, makefile, Makefile, in that order.
  const name = ["GNUmakefile", "makefile", "Makefile"].find((n) => facts.files.has(n));
  if (name === undefined) return {};
  const body = text(facts, name);
  // A rule "test:" (not "test := …", a variable), possibly among other targets.
  const target = (t: string) =>
    new RegExp(`^(?:[^\\s:#=]+\\s+)*${t}(?:\\s+[^\\s:#=]+)*\\s*::?(?!=)`, "m").test(body);
  return {
    test: target("test") ? { command: "make test", source: `${name} target test` } : undefined,
    lint: target("lint") ? { command: "make lint", source: `${name} target lint` } : undefined,
  };
}
