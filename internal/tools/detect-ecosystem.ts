/**
 * Which language image a workspace needs (sandbox-images/: python, go, rust, java, node),
 * from the same facts test.run's command detection reads (detect-commands.ts), so the
 * image always carries the program the detected test command runs:
 *
 *   1. The test command decides: its first word names the toolchain (`go`, `cargo`,
 *      `mvn`, `gradle`/`./gradlew`, `python3`/`pytest`, `npm`/`pnpm`/`yarn`/`node`). A
 *      polyglot repository gets the image of the command test.run will run: a
 *      package.json test script beats pyproject.toml because npm is detected first.
 *   2. A test command that names no toolchain (`make test`, a config command such as
 *      `./run-tests.sh`), or none at all: the first marker file present, in the order
 *      go.mod, Cargo.toml, pom.xml / build.gradle(.kts) / gradlew, Python (pyproject.toml,
 *      setup.py, setup.cfg, requirements.txt, Pipfile, test files), package.json.
 *   3. Else base.
 *
 * Pure: reads only the facts it is given (collected from the archive uploaded at
 * CreateRun, never from the live sandbox). Must never: pick an image by anything but a
 * file's presence or the detected command (no workspace text reaches the reason but file
 * names and detection's own sources).
 */
import {
  detectCommands,
  type Ecosystem,
  WORKSPACE_CONFIG_FILE,
  type WorkspaceFacts,
} from "./detect-commands.ts";

export interface DetectedEcosystem {
  ecosystem: Ecosystem;
  /** What decided, naming the file (e.g. "go.mod"). */
  reason: string;
}

/** A command's first word → the ecosystem whose image has that program. */
const PROGRAMS: ReadonlyMap<string, Ecosystem> = new Map<string, Ecosystem>([
  ["go", "go"],
  ["cargo", "rust"],
  ["rustc", "rust"],
  ["mvn", "java"],
  ["./mvnw", "java"],
  ["gradle", "java"],
  ["./gradlew", "java"],
  ["java", "java"],
  ["python", "python"],
  ["python3", "python"],
  ["pytest", "python"],
  ["tox", "python"],
  ["npm", "node"],
  ["npx", "node"],
  ["pnpm", "node"],
  ["yarn", "node"],
  ["node", "node"],
]);

/** Marker files in the order they decide when the test command does not. */
const MARKERS: readonly (readonly [string, Ecosystem])[] = [
  ["go.mod", "go"],
  ["Cargo.toml", "rust"],
  ["pom.xml", "java"],
  ["build.gradle", "java"],
  ["build.gradle.kts", "java"],
  ["gradlew", "java"],
  ["pyproject.toml", "python"],
  ["setup.py", "python"],
  ["setup.cfg", "python"],
  ["requirements.txt", "python"],
  ["Pipfile", "python"],
  ["package.json", "node"],
];

export function detectEcosystem(facts: WorkspaceFacts): DetectedEcosystem {
  let commands = detectCommands(facts);
  // A broken config file: detection from the other files, as test.run would not run.
  if ("problem" in commands) {
    const files = new Map(facts.files);
    files.delete(WORKSPACE_CONFIG_FILE);
    commands = detectCommands({ ...facts, files });
  }
  const test = commands.test;
  if (test !== undefined) {
    const ecosystem = PROGRAMS.get(firstWord(test.command));
    if (ecosystem !== undefined)
      return { ecosystem, reason: `${test.source} (test command: ${firstWord(test.command)})` };
  }
  for (const [file, ecosystem] of MARKERS)
    if (facts.files.has(file)) return { ecosystem, reason: file };
  if (facts.pythonTests.length > 0)
    return { ecosystem: "python", reason: `Python test files (${facts.pythonTests[0]})` };
  return {
    ecosystem: "base",
    reason: `no ecosystem's file (${MARKERS.map(([f]) => f).join(", ")})`,
  };
}

/** The program of a command line: its first word after `VAR=value` assignments. */
function firstWord(command: string): string {
  const words = command.trim().split(/\s+/);
  const i = words.findIndex((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
  return i < 0 ? "" : (words[i] as string);
}
