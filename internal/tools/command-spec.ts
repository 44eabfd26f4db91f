/**
 * The command lines of test.run, lint.run and setup.run for one run: the policy's
 * (`tools.test`, `tools.lint`, `tools.setup`) when it sets them, else what the uploaded workspace says (detect-commands.ts),
 * each with where it came from — recorded in the call's result — and, for a detected test
 * command, the form that takes a test name.
 *
 * Must never: splice a test name into a line unquoted, or let the workspace override a
 * command the policy sets.
 */
import { shellQuote } from "./run-command.ts";

export interface CommandSpec {
  /** The line run when no test name is given. */
  command: string;
  /** The line with a test name, `{name}` replaced by it (shell-quoted); else as in policy. */
  named?: string;
  /** Where the command came from, e.g. "policy tools.test", "package.json scripts.test". */
  source: string;

  /**
   * "go-json": the line prints a `go test -json` stream (a detected command agentd wrote
   * so): test.run parses it and shows people and the model the text `go test -v` prints.
   */
  output?: "go-json";
}

/** The setup step's command, with what keys its dependency cache (setup-detect.ts). */
export interface SetupSpec extends CommandSpec {
  /** "npm", "pypi", "go", "cargo", "maven", "gradle"; "custom" for a configured line. */
  ecosystem: string;
  /** The lockfile (or manifest) whose content keys the cache; "" when none does. */
  lockfile: string;
  /**
   * The line run instead when the restored cache already holds the installed tree this
   * line would make (npm ci's node_modules): `npm ci` always deletes and reinstalls it.
   */
  warm?: string;
  /**
   * Set by setup-detect.ts only, for a line whose whole outcome is in the cache archive
   * (/cache, and node_modules for npm) and whose every input is a setup input the cache key
   * digests: a restore under exactly the run's key already is what the line would make, so
   * the line is not run (worker/setup-exact-hit.ts). Never set for a configured line.
   */
  outcomeInCache?: true;
  /**
   * Set by the driver over an exact cache hit (worker/drive-setup.ts): setup.run answers
   * from the restored archive without running the line.
   */
  cached?: { digest: string; savedByRun: string };
}

export interface RunCommands {
  test?: CommandSpec;
  lint?: CommandSpec;
  setup?: SetupSpec;
  /** Why the workspace's own configuration could not be used (names the file and field). */
  problem?: string;
  /**
   * The uploaded package.json's scripts (name → body): what `npm test` or `npm run lint`
   * runs, whose files provenance judges too (kernel/risk.ts).
   */
  npmScripts?: Record<string, string>;
}

/** Per command, the policy's when set, else the detected one. */
export function pickCommands(
  tools: { test?: string | undefined; lint?: string | undefined; setup?: string | undefined },
  detected: RunCommands | undefined,
): RunCommands {
  const out: RunCommands = {};
  if (tools.test) out.test = { command: tools.test, source: "policy tools.test" };
  else if (detected?.test !== undefined) out.test = detected.test;
  if (tools.lint) out.lint = { command: tools.lint, source: "policy tools.lint" };
  else if (detected?.lint !== undefined) out.lint = detected.lint;
  // The policy's line keeps the detected cache key (the lockfile still says what it fetches).
  if (tools.setup)
    out.setup = {
      command: tools.setup,
      source: "policy tools.setup",
      ecosystem: detected?.setup?.ecosystem ?? "custom",
      lockfile: detected?.setup?.lockfile ?? "",
    };
  else if (detected?.setup !== undefined) out.setup = detected.setup;
  if (detected?.problem !== undefined && (!out.test || !out.lint)) out.problem = detected.problem;
  if (detected?.npmScripts !== undefined) out.npmScripts = detected.npmScripts;
  return out;
}

/**
 * The line test.run runs. Without a name, `{name}` goes away. With one, it is shell-quoted
 * and put in the spec's named form, else in place of `{name}`, else appended.
 */
export function testCommandLine(spec: CommandSpec, name: string | undefined): string {
  if (name === undefined) return spec.command.replaceAll("{name}", "");
  const quoted = shellQuote(name);
  const base = spec.named ?? spec.command;
  return base.includes("{name}") ? base.replaceAll("{name}", quoted) : `${base} ${quoted}`;
}

/** The error of test.run / lint.run when the run has no such command. */
export function noCommandMessage(which: "test" | "lint", problem: string | undefined): string {
  const found =
    which === "test"
      ? ".agent/config.yaml commands.test, package.json scripts.test, pytest or unittest, go.mod, Cargo.toml, a Makefile test target"
      : ".agent/config.yaml commands.lint, package.json scripts.lint, ruff or flake8 configuration, go.mod, Cargo.toml, a Makefile lint target";
  const why = problem === undefined ? "" : `; ${problem}`;
  return `no ${which} command: the policy sets none (tools.${which}) and the workspace has none (looked for ${found})${why}`;
}
