/**
 * The files that decide what test.run, lint.run and setup.run execute besides their command
 * line: the runner's own configuration and hook files that hold or load code (package.json
 * scripts, a Makefile, eslint.config.js, jest/vitest configs, conftest.py, noxfile.py,
 * tox.ini, setup.cfg, pyproject.toml, build.rs, .cargo/config.toml…). risk.ts adds them to
 * the call's `scripts`, so the kernel's provenance check (provenance.ts) asks a person when
 * the run itself wrote or changed one, whatever the tool's approval setting: the model may
 * change test files (that is what tests are for), not the machinery that runs them unseen.
 * A file that exists neither in the upload nor in the sandbox counts as unchanged.
 *
 * What the runners reach besides these fixed names (node_modules and what its .bin links
 * resolve to, Python environments, conftest.py and build.rs in any directory, toolchain
 * caches) is watched as whole trees (runner-trees.ts) for the runner tools and for any
 * command that runs one of these files (`npm run lint`, `make` in process.run).
 *
 * Limits, said plainly: files these configs import by a workspace path of their choosing (a
 * local eslint plugin `./rules/x.js`, a pytest plugin module named in pyproject.toml) are
 * not followed. Pure data and one join; never I/O.
 */

/** Runner files, relative to the directory the command runs in. */
export const RUNNER_FILES: readonly string[] = [
  // Node: package manager, linters, test runners, transpilers they load.
  ...["package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnp.cjs", "bunfig.toml"],
  ...["deno.json", "deno.jsonc", "tsconfig.json", "biome.json", "biome.jsonc"],
  ...configs("eslint.config", ["js", "mjs", "cjs", "ts", "mts", "cts"]),
  ...[".eslintrc", ...configs(".eslintrc", ["js", "cjs", "json", "yml", "yaml"])],
  ...configs("jest.config", ["js", "ts", "mjs", "cjs", "json"]),
  ...configs("jest.setup", ["js", "ts"]),
  ...configs("vitest.config", ["js", "ts", "mjs", "mts", "cjs", "cts"]),
  ...configs("vitest.workspace", ["js", "ts"]),
  ...configs("vite.config", ["js", "ts", "mjs", "mts"]),
  ...configs(".mocharc", ["js", "cjs", "json", "yml", "yaml"]),
  ...[".babelrc", ...configs(".babelrc", ["js", "cjs"]), ...configs("babel.config", ["js", "cjs"])],
  ...configs("prettier.config", ["js", "cjs", "mjs"]),
  ...configs(".prettierrc", ["js", "cjs"]),
  ...configs("stylelint.config", ["js", "cjs"]),
  ...configs("playwright.config", ["js", "ts"]),
  ...configs("ava.config", ["js", "cjs", "mjs"]),
  "karma.conf.js",
  // Python: pytest, tox, nox, linters' plugin settings, interpreter start-up hooks.
  ...["conftest.py", "tests/conftest.py", "test/conftest.py", "pytest.ini", "pyproject.toml"],
  ...["setup.cfg", "setup.py", "tox.ini", "noxfile.py", ".flake8", ".pylintrc", "pylintrc"],
  ...["mypy.ini", ".mypy.ini", "sitecustomize.py", "usercustomize.py"],
  // Make and task runners.
  ...["Makefile", "makefile", "GNUmakefile", "justfile", "Justfile", ".justfile", "Rakefile"],
  ...["Taskfile.yml", "Taskfile.yaml"],
  // Go, Rust, JVM.
  ...["go.mod", "go.work", ".golangci.yml", ".golangci.yaml", ".golangci.toml"],
  ...["Cargo.toml", "build.rs", ".cargo/config.toml", ".cargo/config"],
  ...["build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"],
  ...["gradle.properties", "pom.xml", ".mvn/maven.config", ".mvn/jvm.config"],
  // agentd's own: where the workspace names its test, lint and setup commands.
  ".agent/config.yaml",
];

function configs(stem: string, exts: readonly string[]): string[] {
  return exts.map((e) => `${stem}.${e}`);
}

/** The runner files of a command run in `cwd` (workspace-relative, "." for the root). */
export function runnerFiles(cwd: string): string[] {
  const dir = cwd.replace(/^(\.\/)+|\/+$/g, "");
  if (dir === "" || dir === ".") return [...RUNNER_FILES];
  return RUNNER_FILES.map((f) => `${dir}/${f}`);
}

/** The tools that run a runner (their configuration and trees are consulted). */
export const RUNNER_TOOLS: ReadonlySet<string> = new Set(["test.run", "lint.run", "setup.run"]);

const RUNNER_NAMES: ReadonlySet<string> = new Set(
  RUNNER_FILES.map((f) => f.slice(f.lastIndexOf("/") + 1)),
);

/**
 * True when a call runs a runner: a runner tool, or a command whose scripts include a runner
 * file (`npm run lint`, `npx eslint`, `make`, `pytest` in process.run: the same PATH).
 */
export function runsRunner(tool: string, scripts: readonly string[]): boolean {
  if (RUNNER_TOOLS.has(tool)) return true;
  return scripts.some((s) => RUNNER_NAMES.has(s.slice(s.lastIndexOf("/") + 1)));
}
