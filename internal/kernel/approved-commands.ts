/**
 * Command families and the `approvedCommands` rules of a policy (rules a person asked for
 * when approving a call, applied by an admin: docs/policy.md "Rules from approvals").
 *
 * A family is the program and its subcommand as literal words ("npm test", "go test",
 * "npm run build"), taken from a line that is exactly one plain command: no operators,
 * redirections, assignments, substitutions, globs or wrappers, nothing the analysis calls
 * dynamic or destructive. The same function reads the approved call (to derive the rule)
 * and every later call (to match it), so a rule never covers more than calls that start
 * with the same words as the one a person saw.
 *
 * Must never: derive a family from a line it cannot read exactly, accept a program that
 * runs arbitrary code by design (shells, interpreters, wrappers), or let a rule relax a
 * denial, a call under `approval: always`, one that touches secrets, runs a file the run
 * wrote, or whose line is dynamic.
 */
import { argvLine } from "../tools/run-command.ts";
import { PROGRAM_RE, SUBCOMMAND_RE } from "./approved-command-words.ts";
import { analyzeCommand, type CommandAnalysis } from "./command-analysis.ts";
import type { Policy } from "./policy-schema.ts";
import { RUN_WRITTEN_SCRIPT } from "./provenance.ts";
import type { Assessment } from "./risk.ts";
import { parseShell } from "./shell-syntax.ts";

/** The longest line a family is read from. */
const MAX_LINE = 16 * 1024;

/**
 * Programs that run whatever their arguments say (shells, interpreters, wrappers, privilege
 * changes, text tools that execute): a family of them would allow anything.
 */
const NO_FAMILY = new Set(
  (
    "sh bash dash zsh ksh mksh fish csh tcsh busybox toybox env xargs sudo su doas exec eval " +
    "command builtin source . nohup timeout nice ionice setsid stdbuf time watch flock strace " +
    "ltrace chroot nsenter unshare script parallel python python2 python3 pypy pypy3 node nodejs " +
    "deno bun perl ruby php lua luajit Rscript osascript awk gawk mawk nawk sed find vi vim nvim " +
    "emacs ed ex docker podman kubectl ssh scp rsync curl wget nc ncat socat rm dd"
  ).split(" "),
);
/** Subcommands that run any package or code named after them: never a family. */
const NO_SUBCOMMAND = new Set(["exec", "x", "dlx", "eval", "shell", "-c", "-e"]);
/** Programs whose `run` subcommand names a script: the script is part of the family. */
const SCRIPT_RUNNERS = new Set(["npm", "yarn", "pnpm", "bun"]);

export type FamilyResult = { words: string[] } | { problem: string };

/** The tool input's command line (process.run: `command` or `argv`), or undefined. */
export function commandLineOf(input: unknown): string | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  const i = input as Record<string, unknown>;
  if (typeof i.command === "string") return i.command;
  if (Array.isArray(i.argv) && i.argv.every((a) => typeof a === "string"))
    return argvLine(i.argv as string[]);
  return undefined;
}

/** Any C0 control character or DEL (never part of a family word). */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** The literal words of a line that is exactly one plain command, or why not. */
function plainWords(
  line: string,
  analysis?: CommandAnalysis,
): { words: string[] } | { problem: string } {
  if (line.length === 0) return { problem: "the command is empty" };
  if (line.length > MAX_LINE) return { problem: "the command is longer than 16 KiB" };
  const parsed = parseShell(line);
  if (parsed.problems.length > 0 || parsed.nested.length > 0 || parsed.commands.length !== 1)
    return { problem: "the command is not exactly one plain command (operators, substitutions)" };
  const c = parsed.commands[0];
  if (c === undefined || c.words.length === 0) return { problem: "the command has no program" };
  if (c.assignments.length > 0 || c.redirects.length > 0 || c.stdin !== undefined || c.group)
    return { problem: "the command sets variables or redirects input or output" };
  for (const w of c.words)
    if (w.expansions.length > 0 || w.glob || w.brace || w.tilde || hasControl(w.text))
      return { problem: "the command has expansions, globs or control characters" };
  const a = analysis ?? analyzeCommand(line);
  if (a.dynamic.length > 0) return { problem: `the command is dynamic (${a.dynamic[0]})` };
  if (a.destructive.length > 0)
    return { problem: `the command is destructive (${a.destructive[0]})` };
  if (a.writes.length > 0) return { problem: "the command writes files by redirection" };
  if (a.commands.length !== 1 || a.commands[0]?.name !== c.words[0]?.text)
    return { problem: "the command runs through a wrapper" };
  return { words: c.words.map((w) => w.text) };
}

/**
 * The family of `line`: ["npm", "test"], ["go", "test"], ["npm", "run", "build"], or a
 * program alone when it has no arguments (["make"]). A program followed by an option or a
 * path first has no family (a program-wide rule would be wider than what was seen).
 */
export function commandFamily(line: string, analysis?: CommandAnalysis): FamilyResult {
  const plain = plainWords(line, analysis);
  if ("problem" in plain) return plain;
  const [program = "", sub, script] = plain.words;
  if (!PROGRAM_RE.test(program))
    return { problem: `the program ${JSON.stringify(program)} is not a plain name on PATH` };
  if (NO_FAMILY.has(program))
    return { problem: `${program} runs whatever its arguments say: no family of it is a rule` };
  if (sub === undefined) return { words: [program] };
  if (NO_SUBCOMMAND.has(sub))
    return { problem: `${program} ${sub} runs any package or code: no family of it is a rule` };
  // A word without a letter (`chmod 644 f`, `kill 1234`) is an operand, not a subcommand:
  // a family of it would cover `chmod 644 -R .` too.
  if (!SUBCOMMAND_RE.test(sub) || !/[A-Za-z]/.test(sub))
    return {
      problem: `${JSON.stringify(sub)} after ${program} is not a subcommand word (an option, a number or a path)`,
    };
  if (SCRIPT_RUNNERS.has(program) && (sub === "run" || sub === "run-script")) {
    if (script === undefined || !SUBCOMMAND_RE.test(script))
      return { problem: `${program} ${sub} needs a script name to be a family` };
    return { words: [program, sub, script] };
  }
  return { words: [program, sub] };
}

/** The family as policy text ("npm test"). */
export function familyText(words: readonly string[]): string {
  return words.join(" ");
}

/**
 * The words of `line` a family rule is matched against: the line's literal words when it
 * has a family (commandFamily), else undefined (no rule covers it). `analysis`: the line's
 * analysis when the caller has it (the kernel's assessment), so it is not done twice.
 */
export function coveredWords(line: string, analysis?: CommandAnalysis): string[] | undefined {
  const plain = plainWords(line, analysis);
  if ("problem" in plain) return undefined;
  return "words" in commandFamily(line, analysis) ? plain.words : undefined;
}

/**
 * Whether a line of `words` (coveredWords) starts with the words of `rule` (a family as the
 * policy writes it); a one-word rule covers only that word alone: a program-wide rule
 * would allow every subcommand, wider than what a person saw ("make" from `make`).
 */
export function wordsCovered(rule: string, words: readonly string[]): boolean {
  const ruleWords = rule.split(" ");
  if (ruleWords.length === 1 && words.length !== 1) return false;
  return ruleWords.every((w, i) => words[i] === w);
}

/** Whether `line` is covered by the family `rule` (coveredWords, then wordsCovered). */
export function familyCovers(rule: string, line: string): boolean {
  const words = coveredWords(line);
  return words !== undefined && wordsCovered(rule, words);
}

/** The facts an approved family may answer for; any other fact still asks a person. */
const RELAXABLE: ReadonlySet<string> = new Set([
  "risk.approvalWhen.highRiskCommand",
  "risk.approvalWhen.touchesConfig",
  "risk.approvalWhen.touchesBuild",
]);
const relaxable = (fact: string): boolean =>
  RELAXABLE.has(fact) || fact.startsWith("risk.approvalWhen.impactAtLeast");

/** Where a call runs, for `approvedCommands`: its repository and command line. */
export interface ApprovedScope {
  /** The run's repository (its `repo` label, "default" without one). */
  repo: string;
  /** The call's command line (process.run), when it has one. */
  line: string | undefined;
}

/**
 * The `approvedCommands` entry that lets `a` (a process.run call asking a person under
 * `approval: risk`) run without asking, as its rule name, or undefined.
 */
export function approvedCommandRule(
  tool: string,
  a: Assessment,
  policy: Policy,
  scope: ApprovedScope | undefined,
): string | undefined {
  if (tool !== "process.run" || scope?.line === undefined) return undefined;
  if (a.risk.touchesSecrets || a.approvalFacts.includes(RUN_WRITTEN_SCRIPT)) return undefined;
  // Only what a family rule speaks to: a high-risk command, build/config files, impact.
  if (!a.approvalFacts.every(relaxable)) return undefined;
  if (!policy.approvedCommands.some((r) => r.repo === scope.repo)) return undefined;
  // The line's words once (reusing the assessment's analysis), then each entry compared.
  const same = a.command !== undefined && a.command.line === scope.line;
  const words = coveredWords(scope.line, same ? a.command?.analysis : undefined);
  if (words === undefined) return undefined;
  const i = policy.approvedCommands.findIndex(
    (r) => r.repo === scope.repo && wordsCovered(r.command, words),
  );
  if (i < 0) return undefined;
  const r = policy.approvedCommands[i];
  return `approvedCommands:${r?.command}@${r?.repo}`;
}
