/**
 * What a shell command line would run, for the risk profile: every simple command's name
 * and arguments, through quoting tricks (r''m, \rm), assignments and wrappers (env, command,
 * xargs, nohup, timeout, find -exec, busybox…), nested shells (sh -c '…'), substitutions
 * and operators; which forms destroy work (find -delete, unlink, git clean…); which files
 * decide what runs (`sh s.sh`, `./x`, the Makefile of `make`, package.json of `npm test`),
 * so the kernel can check whether the run itself wrote them; and every argument that may
 * name a path, literal or glob. The principle: whatever it cannot see through is reported
 * as dynamic, so the kernel asks a person instead of guessing. Never executes anything and
 * never throws.
 */
import { posix } from "node:path";
import type { Effects, Invocation } from "./command-effects.ts";
import { emptyingRedirects } from "./command-empties.ts";
import { familyOf, READ_ONLY } from "./command-families.ts";
import { expandBraces } from "./protected-paths.ts";
import { parseShell, type ShellCommand, type ShellWord } from "./shell-syntax.ts";

export interface SimpleCommand {
  /** Command name without its directory ("/bin/rm" → "rm"). */
  name: string;
  args: string[];
}

export interface CommandAnalysis {
  commands: SimpleCommand[];
  /** Why the analysis cannot tell what runs: substitutions, variables, inline code, eval… */
  dynamic: string[];
  /** Destructive forms found, e.g. "find -delete", "unlink", "git clean". */
  destructive: string[];
  /** Every word of the command line, unquoted (for previews). */
  words: string[];
  /** Files written by redirections (`>`, `>>`) and by options such as find -fprint. */
  writes: string[];
  /** Arguments, redirection targets and assignment values as written: candidate paths. */
  paths: string[];
  /** Arguments the shell expands as globs (after brace expansion), in glob syntax. */
  globs: string[];
  /** File-name patterns a program matches itself (find -name): `*` also matches a leading dot. */
  namePatterns: string[];
  /** Workspace-relative files whose content decides what runs ("s.sh", "Makefile"). */
  scripts: string[];
  /**
   * Files copied onto another (cp and install sources; the inputs of `cat A B > F`), in
   * groups with their target: an existing non-empty target (TARGET/NAME for a directory) is
   * emptied when every file of the group is empty (or, for a reader's inputs, missing: the
   * shell has emptied F before `cat` fails). Paths are workspace-relative, or absolute
   * outside /workspace. The kernel checks them in the container (replace-probe.ts).
   */
  copySources: CopyGroup[];
  /** `mv SRC TARGET` pairs (paths as copySources): an existing non-empty TARGET is replaced. */
  moves: [string, string][];
  /**
   * Workspace files a truncating redirection fills with output the line does not show
   * (`awk '…' > f`), with the program: replacing a non-empty uploaded file asks.
   */
  replaced: { program: string; to: string }[];
}

/** One group of copySources (see there). */
export interface CopyGroup {
  from: string[];
  to: string;
  missingEmpties: boolean;
  /** Sources an earlier command of the line may have made: counted empty. */
  made?: string[];
  /**
   * Sources the line names by a pattern (`cp emp*.txt f`): counted empty, and a directory
   * target is replaced when it holds any non-empty file (the names are not known).
   */
  patterned?: boolean;
  /** The target is not known at probe time (a pattern, or a link the line made first): replaced. */
  unknownTarget?: boolean;
  /** A recursive copy (`cp -r D T`): replaces when D holds an empty file and T is a directory. */
  tree?: boolean;
}

export interface AnalysisOptions {
  /** The command's working directory, relative to the workspace ("" or "." for the root). */
  cwd?: string;
}

/** Nested code (sh -c inside sh -c …) deeper than this is not followed: dynamic. */
const MAX_DEPTH = 8;
/** Simple commands analysed in one line; past it the line is dynamic (and the work bounded). */
const MAX_COMMANDS = 2_000;
/** Wrappers in a row (env env env … rm); past it dynamic. */
const MAX_WRAPPERS = 32;
const MAX_DIRS = 8;
const MAX_BRACES = 64;
const SYSTEM_DIRS = new Set([
  "/bin",
  "/usr/bin",
  "/sbin",
  "/usr/sbin",
  "/usr/local/bin",
  "/usr/local/sbin",
]);
const DECLARERS = new Set(["export", "declare", "typeset", "local", "readonly", "env"]);

/**
 * Environment variables that change which program runs or what it loads (PATH, LD_PRELOAD,
 * BASH_ENV, NODE_OPTIONS, GIT_*, …PATH, …_OPTIONS…). Setting one makes the line dynamic.
 */
const DANGEROUS_VAR =
  /^(\w*PATH|LD_\w*|\w*PRELOAD\w*|BASH_ENV|BASH_FUNC_\w*|ENV|IFS|CDPATH|HOME|SHELL|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|EDITOR|VISUAL|\w*PAGER|GIT_\w*|XDG_\w*|TMPDIR|NODE_OPTIONS|npm_config_\w*|PYTHON\w*|PERL\w*|RUBY\w*|GEM_\w*|BUNDLE_\w*|\w*_OPTIONS|\w*_OPTS|CLASSPATH|MAKEFLAGS|MAKEFILES|MFLAGS|LESSOPEN|LESSCLOSE|BROWSER|SSH_\w*|CC|CXX|CPP|LD|AR|AS|CFLAGS|CXXFLAGS|CPPFLAGS|LDFLAGS|GOFLAGS|GOTOOLCHAIN|RUSTC\w*|RUSTFLAGS|CARGO_\w*|YARN_\w*|PNPM_\w*|COREPACK_\w*|DENO_\w*|BUN_\w*|TERMINFO\w*|LOCPATH|HOSTALIASES)$/i;

/** One command's contribution to "may the line write a script it runs?". */
interface Ran {
  name: string;
  writer: boolean;
  scripts: string[];
}

interface State {
  out: CommandAnalysis;
  dirs: Set<string>;
  dirUnknown: boolean;
  ran: Ran[];
  writeTargets: ShellWord[];
  /** Script paths as written (relative ones resolved once all `cd`s of the line are known). */
  pendingScripts: { ran: Ran; path: string; fromRoot?: boolean; dirOnly?: boolean }[];
  /** Copy sources and moves as written, resolved like the scripts. */
  pendingCopies: {
    from: string[];
    to: string;
    missingEmpties: boolean;
    made: boolean[];
    patterned: boolean;
    unknownTarget: boolean;
    tree: boolean;
  }[];
  /** A link was made earlier on the line (`ln -s a f && cp e f`): later targets are unknown. */
  linked: boolean;
  /** How many of out.words earlier commands of the line named (the current one's come after). */
  earlierWords: number;
  pendingMoves: [string, string][];
  /** Redirections of output the line does not show, as written (resolved like the moves). */
  pendingReplaced: { program: string; to: string }[];
  count: number;
}

/** Analyses `command` as `sh -c` would run it in `options.cwd`; never throws. */
export function analyzeCommand(command: string, options: AnalysisOptions = {}): CommandAnalysis {
  const out: CommandAnalysis = {
    commands: [],
    dynamic: [],
    destructive: [],
    words: [],
    writes: [],
    paths: [],
    globs: [],
    namePatterns: [],
    scripts: [],
    copySources: [],
    moves: [],
    replaced: [],
  };
  const cwd = normaliseDir(options.cwd ?? "");
  const state: State = {
    out,
    dirs: new Set([cwd ?? "."]),
    dirUnknown: cwd === undefined,
    ran: [],
    writeTargets: [],
    pendingScripts: [],
    pendingCopies: [],
    linked: false,
    pendingMoves: [],
    pendingReplaced: [],
    earlierWords: 0,
    count: 0,
  };
  walk(command, state, 0);
  resolveScripts(state);
  resolveCopies(state);
  out.dynamic = [...new Set(out.dynamic)];
  out.destructive = [...new Set(out.destructive)];
  out.scripts = [...new Set(out.scripts)];
  out.paths = [...new Set(out.paths)];
  out.globs = [...new Set(out.globs)];
  out.namePatterns = [...new Set(out.namePatterns)];
  return out;
}

function walk(line: string, s: State, depth: number): void {
  if (depth > MAX_DEPTH) {
    s.out.dynamic.push("nesting too deep");
    return;
  }
  const parsed = parseShell(line);
  s.out.dynamic.push(...parsed.problems);
  for (const code of parsed.nested) walk(code, s, depth + 1);
  for (const cmd of parsed.commands) {
    if (++s.count > MAX_COMMANDS) {
      s.out.dynamic.push("too many commands to analyse");
      return;
    }
    command(cmd, s, depth);
  }
}

function command(cmd: ShellCommand, s: State, depth: number): void {
  s.earlierWords = s.out.words.length;
  for (const a of cmd.assignments) {
    s.out.words.push(a.text);
    assignment(a, s);
  }
  let stdinFile: ShellWord | undefined;
  for (const r of cmd.redirects) {
    if (r.op === "<<" || r.op === "<<-") continue;
    s.out.words.push(r.target.text);
    const dup = (r.op === ">&" || r.op === "<&") && /^(\d+-?|-)$/.test(r.target.text);
    if (dup) continue;
    argument(r.target, s);
    if (r.op === "<" && (r.fd ?? 0) === 0) stdinFile = r.target;
    if (r.op !== "<" && r.op !== "<&" && r.op !== "<<<") {
      s.out.writes.push(r.target.text);
      s.writeTargets.push(r.target);
    }
  }
  for (const w of cmd.words) s.out.words.push(w.text);
  const emptied = emptyingRedirects(cmd);
  s.out.destructive.push(...emptied.reasons);
  if (emptied.inputs !== undefined) copies(emptied.inputs.from, emptied.inputs.to, s, true);
  else fedBack(cmd, s);
  const program = cmd.group ? "{ … }" : (cmd.words[0]?.text ?? "").slice(0, 40);
  for (const t of emptied.unseen) replacedBy(program, t, s);
  // `{ sh; } < s.sh`, `exec < s.sh; sh`: input for commands the redirection does not name.
  const bare = cmd.words.length === 0 || (cmd.words.length === 1 && cmd.words[0]?.text === "exec");
  if (bare && cmd.stdin !== undefined && cmd.stdin !== "pipe")
    s.out.dynamic.push("input redirected into a compound command or the shell itself");
  simple(cmd.words, cmd.stdin, stdinFile, s, depth, 0);
}

/** One simple command (or the command a wrapper runs): record it and apply its family. */
function simple(
  words: readonly ShellWord[],
  stdin: ShellCommand["stdin"],
  stdinFile: ShellWord | undefined,
  s: State,
  depth: number,
  wrapped: number,
  parent?: Ran,
): void {
  const head = words[0];
  if (head === undefined) return;
  if (wrapped > MAX_WRAPPERS) {
    s.out.dynamic.push("too many wrappers");
    return;
  }
  // A wrapped command (env X cmd, npx tool, find -exec cmd) counts as part of its wrapper.
  const ran: Ran = parent ?? { name: "", writer: false, scripts: [] };
  const name = commandName(head, s, ran);
  if (parent === undefined) {
    ran.name = name;
    s.ran.push(ran);
  }
  const args = words.slice(1);
  s.out.commands.push({ name, args: args.map((a) => a.text) });
  // A wrapped command's words are its wrapper's arguments, already looked at.
  if (parent === undefined) for (const a of args) argument(a, s);
  if (DECLARERS.has(name))
    for (const a of args) if (/^[A-Za-z_]\w*\+?=/.test(a.text)) assignment(a, s);
  variableSinks(name, args, s);
  const family = familyOf(name);
  const inv: Invocation = { name, args, stdin, ...(stdinFile === undefined ? {} : { stdinFile }) };
  family?.(inv, effects(s, ran, depth, wrapped));
  if (family === undefined && ran.scripts.length === 0 && !READ_ONLY.has(name)) ran.writer = true;
  // From here on a path may lead elsewhere than the probe sees it (`ln -s a f && cp e f`,
  // `cp -l a f`, a rename: `mv a c && cp e c`): later targets are not known at probe time.
  if (name === "ln" || name === "link" || name === "mv" || makesLinks(name, args)) s.linked = true;
}

function effects(s: State, ran: Ran, depth: number, wrapped: number): Effects {
  return {
    dynamic: (reason) => s.out.dynamic.push(reason),
    destructive: (reason) => s.out.destructive.push(reason),
    script: (w) => script(w, s, ran),
    scriptFiles: (dir, files) => {
      if (dir !== undefined && !literal(dir)) {
        s.out.dynamic.push(`a directory the line computes (${dir.text.slice(0, 80)})`);
        return;
      }
      let prefix = dir === undefined ? "" : `${dir.text.replace(/\/+$/, "")}/`;
      const fromRoot = prefix.startsWith("/");
      if (fromRoot && !prefix.startsWith("/workspace/")) {
        s.out.dynamic.push(`runs files in ${prefix.slice(0, 80)}, outside the workspace`);
        return;
      }
      if (fromRoot) prefix = prefix.slice("/workspace/".length);
      for (const f of files) s.pendingScripts.push({ ran, path: `${prefix}${f}`, fromRoot });
      ran.scripts.push(...files);
    },
    code: (text) => walk(text, s, depth + 1),
    run: (words, stdin) => simple(words, stdin, undefined, s, depth, wrapped + 1, ran),
    writer: () => {
      ran.writer = true;
    },
    pattern: (w) => {
      if (w.expansions.length > 0) s.out.dynamic.push(...w.expansions);
      else s.out.namePatterns.push(w.text);
    },
    write: (target) => {
      // A path too: protected, config and build paths judge what a program writes.
      argument(target, s);
      s.out.writes.push(target.text);
      s.writeTargets.push(target);
    },
    cd: (target) => cd(target, s),
    copies: (sources, target, opts) => {
      copies(sources, target, s, false, opts?.tree === true);
      s.writeTargets.push(target);
    },
    moves: (source, target) => {
      s.writeTargets.push(target);
      if (patternOnly(source) || patternOnly(target) || s.linked)
        s.out.destructive.push(
          `mv ${source.text.slice(0, 80)} onto ${target.text.slice(0, 80)} (a path the line does not spell out, or through a link it made: may replace a file)`,
        );
      else if (literal(source) && literal(target)) s.pendingMoves.push([source.text, target.text]);
    },
    replaces: (program, target) => replacedBy(program, target, s),
    configFromDirectory: () => s.pendingScripts.push({ ran, path: ran.name, dirOnly: true }),
  };
}

/** The command's name; a path is a script (in the workspace) or dynamic (elsewhere). */
function commandName(w: ShellWord, s: State, ran: Ran): string {
  if (!literal(w)) {
    s.out.dynamic.push(
      `command name from ${w.expansions[0] ?? (w.glob ? "a glob" : w.tilde ? "~" : "braces")}`,
    );
  }
  const text = w.text;
  const slash = text.lastIndexOf("/");
  if (slash < 0) return text;
  const dir = text.slice(0, slash) || "/";
  if (!SYSTEM_DIRS.has(dir.replace(/\/+$/, "") || "/")) script(w, s, ran);
  return text.slice(slash + 1);
}

/** A file that decides what runs: workspace-relative, else the line is dynamic. */
function script(w: ShellWord, s: State, ran: Ran): void {
  if (!literal(w)) {
    s.out.dynamic.push(`runs a file the line computes (${w.text.slice(0, 80)})`);
    return;
  }
  const path = w.text;
  if (path.startsWith("/")) {
    if (!path.startsWith("/workspace/")) {
      s.out.dynamic.push(`runs ${path.slice(0, 80)}, a file outside the workspace`);
      return;
    }
    s.pendingScripts.push({ ran, path: path.slice("/workspace/".length), fromRoot: true });
    ran.scripts.push(path);
    return;
  }
  s.pendingScripts.push({ ran, path });
  ran.scripts.push(path);
}

/** Resolves the scripts against every directory the line may be in; then the write check. */
function resolveScripts(s: State): void {
  for (const { path, fromRoot, dirOnly } of s.pendingScripts) {
    if (dirOnly) {
      if (s.dirUnknown) s.out.dynamic.push(`${path} runs in a directory the line does not show`);
      continue;
    }
    if (fromRoot) {
      const rel = normaliseDir(path);
      if (rel === undefined || rel === ".")
        s.out.dynamic.push(`runs /workspace/${path.slice(0, 80)}, outside the workspace`);
      else s.out.scripts.push(rel);
      continue;
    }
    if (s.dirUnknown) {
      s.out.dynamic.push(`runs ${path.slice(0, 80)} from a directory the line does not show`);
      continue;
    }
    for (const d of s.dirs) {
      const rel = normaliseDir(d === "." ? path : `${d}/${path}`);
      if (rel === undefined || rel === ".")
        s.out.dynamic.push(`runs ${path.slice(0, 80)}, outside the workspace`);
      else s.out.scripts.push(rel);
    }
  }
  const scripts = new Set(s.out.scripts);
  if (scripts.size === 0) return;
  for (const r of s.ran) {
    if (!r.writer) continue;
    const other = s.ran.find((x) => x !== r && x.scripts.length > 0);
    if (other !== undefined) {
      s.out.dynamic.push(`${r.name} may write what ${other.name} then runs`);
      return;
    }
  }
  for (const t of s.writeTargets) {
    const targets = literal(t)
      ? [...s.dirs].map((d) => normaliseDir(d === "." ? t.text : `${d}/${t.text}`))
      : [undefined];
    if (targets.some((x) => x === undefined || scripts.has(x)))
      s.out.dynamic.push(`the line writes ${t.text.slice(0, 80)}, which it runs`);
  }
}

/**
 * A group of copy sources and its target. A path the line computes (`$F`) is dynamic
 * already (argument()); one named by a pattern (a glob, braces, `~`) is judged failing
 * closed: pattern sources count as empty, a pattern target (or any target once the line
 * made a link) as an existing file.
 */
function copies(
  sources: readonly ShellWord[],
  target: ShellWord,
  s: State,
  missingEmpties = false,
  tree = false,
): void {
  if (![...sources, target].every((w) => literal(w) || patternOnly(w))) return;
  const patterned = sources.some(patternOnly);
  const made = sources.map((w) => patternOnly(w) || madeEarlier(w, s));
  s.pendingCopies.push({
    from: sources.map((w) => w.text),
    to: target.text,
    missingEmpties,
    made,
    patterned,
    unknownTarget: patternOnly(target) || s.linked,
    tree,
  });
}

/** `cp -l/-s/--link/--symbolic-link`, `git mv`: the line makes links or renames. */
function makesLinks(name: string, args: readonly ShellWord[]): boolean {
  if (name === "git") return args.some((a) => a.text === "mv");
  if (name !== "cp") return false;
  return args.some((a) => /^(-[A-Za-z]*[ls][A-Za-z]*|--link|--symbolic-link)$/.test(a.text));
}

/** A word the shell expands against the file system only (no `$`, no substitution). */
function patternOnly(w: ShellWord): boolean {
  return w.expansions.length === 0 && !literal(w);
}

/**
 * A workspace file a program fills with output the line does not show (`awk … > f`,
 * `tar -cf f …`): probed; a pattern target, or one written through a link the line made,
 * is judged as replaced.
 */
function replacedBy(program: string, target: ShellWord, s: State): void {
  if (patternOnly(target) || (s.linked && literal(target)))
    s.out.destructive.push(
      `${program} … > ${target.text.slice(0, 80)} (a path the line does not spell out, or through a link it made: may replace a file with output the line does not show)`,
    );
  else if (literal(target)) s.pendingReplaced.push({ program, to: target.text });
}

/**
 * True when an earlier command of the line names `w` (`: > e; cp e f`, `touch e && cp e f`,
 * `head -c0 f > /tmp/z; cp /tmp/z f`): any program may have made it, so its content at the
 * probe's time says nothing and the probe counts it empty.
 */
function madeEarlier(w: ShellWord, s: State): boolean {
  const norm = (p: string): string => posix.normalize(p);
  const t = norm(w.text);
  return s.out.words.slice(0, s.earlierWords).some((x) => x !== "" && norm(x) === t);
}

/**
 * Any program whose standard output truncates a file and that reads a file an earlier
 * command of the line wrote (`cp f /tmp/n && grep -v x /tmp/n > f`): f gets back what the
 * line made of it, which may be nothing. A copy group of those files, counted empty.
 */
function fedBack(cmd: ShellCommand, s: State): void {
  const out = cmd.redirects.find(
    (r) => (r.op === ">" || r.op === ">|" || r.op === "&>") && (r.fd ?? 1) === 1,
  );
  if (cmd.group || out === undefined || out.target.text.startsWith("/dev/")) return;
  const read = cmd.words.slice(1).filter((w) => literal(w) && madeEarlier(w, s));
  const input = cmd.redirects.find((r) => r.op === "<" && (r.fd ?? 0) === 0)?.target;
  if (input !== undefined && literal(input) && madeEarlier(input, s)) read.push(input);
  if (read.length > 0) copies(read, out.target, s);
}

/** Copy sources and moves against every directory the line may be in (as the scripts). */
function resolveCopies(s: State): void {
  const place = (abs: string): string => {
    const n = posix.normalize(abs);
    if (n === "/workspace" || n === "/workspace/") return ".";
    return n.startsWith("/workspace/") ? n.slice("/workspace/".length) : n;
  };
  const forms = (p: string): string[] | undefined => {
    if (p.startsWith("/")) return [place(p)];
    if (s.dirUnknown) return undefined;
    return [...s.dirs].map((d) => place(`/workspace/${d === "." ? "" : `${d}/`}${p}`));
  };
  for (const group of s.pendingCopies) {
    const each = [...group.from, group.to].map(forms);
    if (each.some((f) => f === undefined)) {
      s.out.dynamic.push("copies a file in a directory the line does not show");
      continue;
    }
    const all = each as string[][];
    const n = Math.max(...all.map((f) => f.length));
    for (let k = 0; k < n; k++) {
      const at = all.map((f) => f[k] ?? f[0] ?? "");
      const to = at.pop() ?? "";
      const made = at.filter((_, i) => group.made[i] === true);
      s.out.copySources.push({
        from: at,
        to,
        missingEmpties: group.missingEmpties,
        ...(made.length > 0 ? { made } : {}),
        ...(group.patterned ? { patterned: true } : {}),
        ...(group.unknownTarget ? { unknownTarget: true } : {}),
        ...(group.tree ? { tree: true } : {}),
      });
    }
  }
  for (const [from, to] of s.pendingMoves) {
    const a = forms(from);
    const b = forms(to);
    if (a === undefined || b === undefined) {
      s.out.dynamic.push("moves a file in a directory the line does not show");
      continue;
    }
    const n = Math.max(a.length, b.length);
    for (let k = 0; k < n; k++) s.out.moves.push([a[k] ?? a[0] ?? "", b[k] ?? b[0] ?? ""]);
  }
  // Only files of the workspace: a scratch file in /tmp is the run's own.
  for (const { program, to } of s.pendingReplaced)
    for (const p of forms(to) ?? [])
      if (p !== "." && !p.startsWith("/") && !p.startsWith("../"))
        s.out.replaced.push({ program, to: p });
}

function cd(target: ShellWord | undefined, s: State): void {
  if (target === undefined || !literal(target) || target.text === "-") {
    s.dirUnknown = true;
    return;
  }
  const t =
    target.text.startsWith("/workspace/") || target.text === "/workspace"
      ? target.text.slice("/workspace".length)
      : target.text;
  if (t.startsWith("/") && target.text !== "/workspace" && !target.text.startsWith("/workspace/")) {
    s.dirUnknown = true;
    return;
  }
  const absolute = target.text.startsWith("/workspace");
  for (const d of [...s.dirs]) {
    const next = normaliseDir(absolute || d === "." ? t : `${d}/${t}`);
    if (next === undefined) s.dirUnknown = true;
    else s.dirs.add(next);
  }
  if (s.dirs.size > MAX_DIRS) s.dirUnknown = true;
}

/** A workspace-relative directory ("." for the root), or undefined when it leaves. */
function normaliseDir(path: string): string | undefined {
  const out: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (out.length === 0) return undefined;
      out.pop();
    } else out.push(seg);
  }
  return out.length === 0 ? "." : out.join("/");
}

function literal(w: ShellWord): boolean {
  return w.expansions.length === 0 && !w.glob && !w.brace && !w.tilde;
}

/** An argument: a candidate path, a glob to test, or dynamic when the line computes it. */
function argument(w: ShellWord, s: State): void {
  if (w.expansions.length > 0) s.out.dynamic.push(...w.expansions);
  if (w.tilde) s.out.dynamic.push("~ (a home directory)");
  if (w.expansions.length > 0 || w.tilde) return;
  if (!w.glob && !w.brace) {
    s.out.paths.push(w.text);
    return;
  }
  const expanded = w.brace ? expandBraces(w.pattern, MAX_BRACES) : [w.pattern];
  if (expanded === undefined) {
    s.out.dynamic.push("brace expansion too large to check");
    return;
  }
  for (const e of expanded) {
    if (/(^|[^\\])[*?[]/.test(e)) s.out.globs.push(e);
    else s.out.paths.push(e.replace(/\\(.)/g, "$1"));
  }
}

/** Builtins that set variables named by their arguments (read PATH, for PATH in …, printf -v). */
const VARIABLE_SINKS = new Set([
  "for",
  "select",
  "read",
  "mapfile",
  "readarray",
  "getopts",
  "wait",
  "printf",
]);

function variableSinks(name: string, args: readonly ShellWord[], s: State): void {
  if (DECLARERS.has(name) && args.some((a) => /^[-+][a-zA-Z]*n/.test(a.text)))
    s.out.dynamic.push(`${name} -n (a variable naming another)`);
  if (!VARIABLE_SINKS.has(name)) return;
  if (name === "printf" && !args.some((a) => a.text === "-v")) return;
  for (const a of args) if (DANGEROUS_VAR.test(a.text)) s.out.dynamic.push(`sets ${a.text}`);
}

function assignment(w: ShellWord, s: State): void {
  const name = w.text.slice(0, w.text.search(/\+?=/));
  if (DANGEROUS_VAR.test(name)) s.out.dynamic.push(`sets ${name}`);
  if (w.expansions.length > 0) s.out.dynamic.push(...w.expansions);
  const eq = w.text.indexOf("=");
  if (w.expansions.length === 0) s.out.paths.push(w.text.slice(eq + 1));
}

/**
 * True when `pattern` ("rm" or "git push") names one of the commands: the first word is the
 * command's name, the others appear among its arguments in order.
 */
export function commandMatches(commands: readonly SimpleCommand[], pattern: string): boolean {
  const [head, ...rest] = pattern.trim().split(/\s+/);
  return commands.some((c) => {
    if (c.name !== head) return false;
    let j = 0;
    for (const a of c.args) if (j < rest.length && a === rest[j]) j++;
    return j === rest.length;
  });
}
