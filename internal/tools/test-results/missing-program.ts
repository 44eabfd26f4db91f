/**
 * A command that exited 127 (the shell found no such program), or `python3 -m X` without
 * the module X: which program, from the
 * shell's own words ("sh: 1: go: not found", "bash: go: command not found", "env: 'go':
 * No such file or directory"), else the command's first word; and which agentd sandbox
 * image has it, with how to pick that image. The images are those `make images` builds
 * (sandbox-images/README.md), named agentd-sandbox-<ecosystem>:latest.
 *
 * Pure. Must never: name an image that does not carry the program.
 */
import { cleanText } from "./clean-text.ts";

/** The ecosystem image of each program agentd knows. */
const ECOSYSTEMS: Record<string, string> = {
  python: "python",
  python3: "python",
  pytest: "python",
  pip: "python",
  pip3: "python",
  go: "go",
  gofmt: "go",
  cargo: "rust",
  rustc: "rust",
  java: "java",
  javac: "java",
  mvn: "java",
  gradle: "java",
  "./gradlew": "java",
  "./mvnw": "java",
  node: "node",
  npm: "node",
  npx: "node",
  pnpm: "node",
  yarn: "node",
  corepack: "node",
};

const NOT_FOUND = [
  /^(?:\S*sh)(?::(?: line)? \d+)?: (\S+): (?:command )?not found\s*$/m,
  /^(\S+): (?:command )?not found\s*$/m,
  /^env: ['‘]?([^'’\s]+)['’]?: No such file or directory\s*$/m,
];

export interface MissingProgram {
  /** The program the shell did not find. */
  program: string;
  /** The ecosystem whose image has it ("go"), when agentd knows one. */
  ecosystem?: string;
  /** That image ("agentd-sandbox-go:latest"). */
  image?: string;
  /** A Python module run with -m rather than a program. */
  module?: boolean;
}

export function missingProgram(command: string, stderr: string): MissingProgram {
  let program: string | undefined;
  for (const re of NOT_FOUND) {
    const m = re.exec(stderr);
    if (m !== null) {
      program = m[1];
      break;
    }
  }
  // Else the command's first word after any VAR=value assignments.
  program ??=
    command
      .trim()
      .split(/\s+/)
      .find((w) => !/^[A-Za-z_]\w*=/.test(w)) ?? "";
  program = cleanText(program, 100, true);
  const base = program.startsWith("./") ? program : (program.split("/").at(-1) ?? program);
  const ecosystem = Object.hasOwn(ECOSYSTEMS, base) ? ECOSYSTEMS[base] : undefined;
  return ecosystem === undefined
    ? { program }
    : { program, ecosystem, image: `agentd-sandbox-${ecosystem}:latest` };
}

/**
 * `python3 -m pytest` where the image has no pytest: Python says "/usr/bin/python3: No
 * module named pytest" and exits 1 — a missing program too, when the command runs that
 * very module with -m (a test's own failed import reads "ModuleNotFoundError: …").
 */
export function missingModule(command: string, stderr: string): MissingProgram | undefined {
  const m = /^(?:\S*\/)?python[\d.]*: No module named ([\w.]+)\s*$/m.exec(stderr);
  const mod = m?.[1];
  if (
    mod === undefined ||
    !new RegExp(`(?:^|\\s)-m\\s+${mod.replace(/\./g, "\\.")}(?:\\s|$)`).test(command)
  )
    return undefined;
  const ecosystem = Object.hasOwn(ECOSYSTEMS, mod) ? ECOSYSTEMS[mod] : undefined;
  return ecosystem === undefined
    ? { program: mod, module: true }
    : { program: mod, module: true, ecosystem, image: `agentd-sandbox-${ecosystem}:latest` };
}

/** The error message for a command whose program (or Python module) is not in the image. */
export function missingProgramMessage(tool: string, command: string, m: MissingProgram): string {
  // What to do comes before the command line, which may be long: a one-line view keeps it.
  const head = m.module
    ? `${m.program}: Python module not found in this run's sandbox image`
    : `${m.program || "a program"}: command not found in this run's sandbox image (exit 127)`;
  const advice =
    m.image === undefined
      ? "No agentd image is known to have it: install it in the setup step (.agent/config.yaml commands.setup) or run in an image that has it (.agent/config.yaml image:, agentctl --image)."
      : `The image ${m.image} has it: pick it with \`image: ${m.ecosystem}\` in .agent/config.yaml (or agentctl --image ${m.image}).`;
  return `${head}. ${advice} ${tool} ran ${JSON.stringify(cleanText(command, 200, true))}.`;
}
