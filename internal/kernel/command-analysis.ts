/**
 * What a shell command line would run, for the risk profile: every simple command's name
 * and arguments, through quoting tricks (r''m, \rm, $'\x72m'), env assignments and
 * wrappers (env, command, xargs, nohup, timeout, find -exec…), nested shells (sh -c '…'),
 * command substitutions ($(…), `…`) and operators (; && || | &). Anything it cannot see
 * through is reported as dynamic, so the kernel can ask a person instead of guessing.
 * Never executes anything.
 */
import { parse } from "shell-quote";

export interface SimpleCommand {
  /** Command name without its directory ("/bin/rm" → "rm"). */
  name: string;
  args: string[];
}

export interface CommandAnalysis {
  commands: SimpleCommand[];
  /** Constructs that hide what runs: substitutions, eval, nested interpreters, pipes into a shell, here-docs. */
  dynamic: string[];
  /** Every word of the command line, unquoted (for path checks). */
  words: string[];
  /** Output redirections (`>` / `>>`) and their targets. */
  writes: string[];
}

const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ash", "ksh", "fish", "busybox"]);
const INTERPRETERS = new Set([
  "python",
  "python3",
  "python2",
  "node",
  "nodejs",
  "perl",
  "ruby",
  "php",
  "lua",
  "deno",
  "bun",
]);
/** Wrappers whose first non-option argument is the command they run. */
const WRAPPERS = new Set([
  "env",
  "command",
  "exec",
  "nohup",
  "time",
  "nice",
  "ionice",
  "stdbuf",
  "setsid",
  "chronic",
  "unbuffer",
  "builtin",
  "sudo",
  "doas",
  "xargs",
  "timeout",
  "watch",
  "strace",
  "ltrace",
  "flock",
]);
const SEPARATORS = new Set([";", "&&", "||", "|", "|&", "&", "(", ")", ";;", "\n"]);
const MAX_DEPTH = 4;

type Token = string | { op: string } | { comment: string } | { pattern: string };

export function analyzeCommand(command: string): CommandAnalysis {
  const out: CommandAnalysis = { commands: [], dynamic: [], words: [], writes: [] };
  walk(command, out, 0);
  return out;
}

function walk(command: string, out: CommandAnalysis, depth: number): void {
  if (depth > MAX_DEPTH) {
    out.dynamic.push("nesting too deep");
    return;
  }
  if (command.includes("`")) {
    out.dynamic.push("backtick substitution");
    for (const m of command.matchAll(/`([^`]*)`/g)) walk(m[1] ?? "", out, depth + 1);
  }
  if (/\$\(/.test(command)) out.dynamic.push("$(…) substitution");
  if (/<<-?\s*['"]?\w/.test(command)) out.dynamic.push("here-document");
  if (/\$\{?[A-Za-z_]/.test(command)) {
    // Variables in command position hide the command; elsewhere they are only noted.
    if (/(^|[;&|(]\s*|\$\(\s*)\$\{?[A-Za-z_]/.test(command))
      out.dynamic.push("variable as a command");
  }
  let tokens: Token[];
  try {
    tokens = parse(command.replace(/`/g, " "), (key) => `$${key}`) as Token[];
  } catch {
    out.dynamic.push("unparseable command line");
    return;
  }
  let current: string[] = [];
  let redirect = false;
  let piped = false;
  const flush = (): void => {
    if (current.length > 0) simple(current, out, depth, piped);
    current = [];
  };
  for (const t of tokens) {
    if (typeof t === "string") {
      out.words.push(t);
      if (redirect) {
        out.writes.push(t);
        redirect = false;
        continue;
      }
      current.push(t);
    } else if ("op" in t) {
      if (t.op === ">" || t.op === ">>" || t.op === ">|" || t.op === "&>") redirect = true;
      else if (t.op === "<<" || t.op === "<<<") out.dynamic.push("here-document");
      if (SEPARATORS.has(t.op)) {
        flush();
        piped = t.op === "|" || t.op === "|&";
      }
    }
  }
  flush();
  out.dynamic = [...new Set(out.dynamic)];
}

/** One simple command: strip assignments and wrappers, record it, descend into nested shells. */
function simple(words: string[], out: CommandAnalysis, depth: number, piped = false): void {
  let i = 0;
  while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i] as string)) i++;
  while (i < words.length) {
    const name = base(words[i] as string);
    if (!WRAPPERS.has(name)) break;
    out.commands.push({ name, args: words.slice(i + 1) });
    i++;
    // Skip the wrapper's options, assignments (env X=1) and a numeric argument (timeout 5).
    while (i < words.length) {
      const w = words[i] as string;
      if (
        w.startsWith("-") ||
        /^[A-Za-z_][A-Za-z0-9_]*=/.test(w) ||
        (name === "timeout" && /^\d/.test(w))
      )
        i++;
      else break;
    }
  }
  if (i >= words.length) return;
  const name = base(words[i] as string);
  const args = words.slice(i + 1);
  out.commands.push({ name, args });
  if (name.startsWith("$")) out.dynamic.push("variable as a command");
  if (name === "eval" || name === "source" || name === ".") {
    out.dynamic.push(name);
    walk(args.join(" "), out, depth + 1);
  }
  if (SHELLS.has(name) || INTERPRETERS.has(name)) {
    const c = args.indexOf("-c");
    const e = args.findIndex((a) => a === "-e" || a === "--eval");
    if (SHELLS.has(name) && c >= 0 && args[c + 1] !== undefined) {
      out.dynamic.push(`${name} -c`);
      walk(args[c + 1] as string, out, depth + 1);
    } else if (INTERPRETERS.has(name) && (c >= 0 || e >= 0)) {
      out.dynamic.push(`${name} inline code`);
    } else if (piped) {
      out.dynamic.push(`pipe into ${name}`);
    }
  }
  // find -exec / -execdir / -ok run their own command.
  if (name === "find") {
    args.forEach((a, k) => {
      if (a === "-exec" || a === "-execdir" || a === "-ok" || a === "-okdir") {
        const end = args.findIndex((x, j) => j > k && (x === ";" || x === "+" || x === "\\;"));
        simple(args.slice(k + 1, end < 0 ? undefined : end), out, depth + 1);
      }
    });
  }
}

function base(word: string): string {
  const w = word.replace(/^\\/, "");
  const slash = w.lastIndexOf("/");
  return slash >= 0 ? w.slice(slash + 1) : w;
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
