/**
 * What a recorded call did to the workspace, as far as the kernel can tell from its input:
 * nothing (repo.read, repo.search, a process.run line made only of programs that never
 * write), a patch that can be applied again (repo.patch: deterministic, checked against its
 * recorded diff), something the drive runs again itself (setup.run, after a new container),
 * or an effect that cannot be reproduced (any other command). A lost container's recovery
 * (worker/workspace-recovery.ts) asks this for each call recorded ok since the restore point.
 * Must never: call a command read-only when the analysis cannot see what it runs (dynamic
 * lines, redirections, unknown programs all count as writing).
 */
import { argvLine } from "../tools/run-command.ts";
import { SETUP_TOOL } from "../tools/setup-run.ts";
import { analyzeCommand } from "./command-analysis.ts";
import { READ_ONLY_TOOLS } from "./kernel.ts";

export type CallEffect = "none" | "patch" | "rerun" | "unreproducible";

/**
 * Programs that never write a file whatever their arguments (wrappers such as env or
 * timeout are here because the command they run is judged on its own). Narrower than the
 * provenance list (command-families.ts READ_ONLY): touch, mkdir, sed, awk, find and xargs
 * can write, or run what writes.
 */
const NEVER_WRITES: ReadonlySet<string> = new Set(
  (
    "ls cat echo printf grep egrep fgrep rg ag head tail wc pwd true false test [ : cd pushd " +
    "popd sleep date which type whoami id uname hostname basename dirname realpath readlink " +
    "stat du df diff cmp comm cut tr nl tac rev fold paste join column seq expr yes md5sum " +
    "sha1sum sha256sum sha512sum b2sum cksum base64 base32 od hexdump jq more printenv exit " +
    "return shift set unset export read wait jobs getopts local readonly declare typeset " +
    "locale nproc free uptime ps strings env nice nohup timeout time command builtin stdbuf " +
    "ionice"
  ).split(" "),
);

/** Redirection targets that are not files of the workspace. */
const NOT_A_FILE = new Set(["/dev/null", "/dev/stdout", "/dev/stderr"]);

/** What a call of `tool` with this recorded input did to the workspace. */
export function callEffect(tool: string, input: unknown): CallEffect {
  if (READ_ONLY_TOOLS.has(tool)) return "none";
  if (tool === "repo.patch") return "patch";
  if (tool === SETUP_TOOL) return "rerun";
  if (tool === "process.run") return commandMayWrite(input) ? "unreproducible" : "none";
  // test.run and lint.run run configured commands (a formatter with --write, snapshot
  // updates, build outputs): their effects are taken as writes. Unknown tools too.
  return "unreproducible";
}

/** Whether a process.run input may have written a file (true when unsure). */
export function commandMayWrite(input: unknown): boolean {
  if (input === null || typeof input !== "object") return true;
  const i = input as { command?: unknown; argv?: unknown; cwd?: unknown };
  const cwd = typeof i.cwd === "string" ? i.cwd : "";
  if (typeof i.command === "string") return lineMayWrite(i.command, cwd);
  if (Array.isArray(i.argv) && i.argv.length > 0 && i.argv.every((a) => typeof a === "string")) {
    const argv = i.argv as string[];
    const name = (argv[0] ?? "").split("/").pop() ?? "";
    // The same analysis as a shell line (options that run a program, such as rg --pre, and
    // a program named by a path); a wrapper's command is not analysed here.
    return WRAPPERS.has(name) || argv.length > 65 || lineMayWrite(argvLine(argv), cwd);
  }
  return true;
}

/** Where the programs of NEVER_WRITES live; a program of that name anywhere else may be the model's own. */
const SYSTEM_DIRS = ["/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/", "/usr/local/bin/"];

/**
 * Whether a command of the line is named by a path outside the system's directories
 * (`./cat`, `bin/ls`, `/workspace/ls`: a script the model may have written). A word that
 * merely looks so (an argument `dir/cat`) counts too: unsure is writing.
 */
function runsAPathProgram(words: readonly string[], names: readonly string[]): boolean {
  return words.some(
    (w) =>
      w.includes("/") &&
      names.some((n) => w.endsWith(`/${n}`) && !SYSTEM_DIRS.some((d) => w === `${d}${n}`)),
  );
}

/** rg and ag run a preprocessor named by --pre. */
const RUNS_A_PROGRAM = (c: { name: string; args: readonly string[] }): boolean =>
  (c.name === "rg" || c.name === "ag") &&
  c.args.some((x) => x === "--pre" || x.startsWith("--pre="));

/** Programs that run another program named in their arguments. */
const WRAPPERS = new Set(["env", "nice", "nohup", "timeout", "time", "command", "builtin"]);
WRAPPERS.add("stdbuf").add("ionice");

function lineMayWrite(line: string, cwd: string): boolean {
  const a = analyzeCommand(line, { cwd });
  if (a.dynamic.length > 0 || a.destructive.length > 0) return true;
  if (a.writes.some((w) => !NOT_A_FILE.has(w))) return true;
  if (a.commands.some((c) => !NEVER_WRITES.has(c.name) || RUNS_A_PROGRAM(c))) return true;
  return runsAPathProgram(
    a.words,
    a.commands.map((c) => c.name),
  );
}
