/**
 * A conservative reader of POSIX sh command lines (what `sh -c LINE` would parse): simple
 * commands with their words, assignments and redirections, through quoting, comments,
 * newlines, line continuations, here-documents, `$(…)`, backticks, `${…}` and process
 * substitutions. Code found inside substitutions is parsed too (its commands are listed like
 * any other) or handed back as text to analyse. Every construct it does not follow exactly
 * is named in `problems` so the caller can treat the line as dynamic.
 *
 * Why not shell-quote: it is a word splitter, not a parser (a newline is not a separator to
 * it, `#` swallows the rest of the line including later lines, `$((` and `${…}` come out
 * mangled), and those differences are exactly where a hidden command hides. The parsers on
 * npm that follow sh closely are asynchronous (WASM), unmaintained GopherJS builds or native
 * modules; the kernel needs a synchronous, total, sub-millisecond answer, and only needs to
 * recognise the ordinary subset exactly and flag the rest.
 *
 * Must never execute anything, never throw (every input yields a result), and never hide a
 * byte of the line: text is either a word, an operator, a comment, a quoted here-document
 * body, or code that is parsed.
 */

/** One word of a command, after quote removal. */
export interface ShellWord {
  /** The word without its quotes; expansions are kept as written ("$HOME", "$(id)"). */
  text: string;
  /** The word as a shell glob: quoted characters backslash-escaped, unquoted ones as written. */
  pattern: string;
  /** Unquoted `*`, `?` or `[…]`: the shell expands the word against the file system. */
  glob: boolean;
  /** Unquoted `{a,b}` or `{1..3}`: bash expands it (dash does not). */
  brace: boolean;
  /** Unquoted leading `~`: the word names a home directory. */
  tilde: boolean;
  /** Expansions whose value the line does not show, e.g. "parameter $HOME", "command substitution". */
  expansions: string[];
  /** Some part of the word was quoted (a quoted reserved word is not reserved). */
  quoted: boolean;
}

export interface Redirect {
  /** The operator: `>`, `>>`, `>|`, `<`, `<>`, `&>`, `&>>`, `>&`, `<&`, `<<`, `<<-`, `<<<`. */
  op: string;
  /** File descriptor written before the operator (`2>x`), if any. */
  fd?: number;
  target: ShellWord;
  /** `<<`, `<<-`: the here-document's body as read (lines joined by "\n"; "" when empty). */
  body?: string;
}

export interface ShellCommand {
  /** `NAME=value` words before the command name. */
  assignments: ShellWord[];
  words: ShellWord[];
  redirects: Redirect[];
  /** Where standard input comes from when it is not inherited. */
  stdin?: "pipe" | "heredoc" | "herestring" | "file";
  /**
   * The command follows the end of a compound command (`}`, `)`, `done`, `fi`, `esac`): its
   * redirections apply to that compound command (`{ echo a; } > f`), not to nothing.
   */
  group?: boolean;
}

export interface ShellParse {
  commands: ShellCommand[];
  /** Code to analyse on its own (inside `${…}`, `$((…))`, backticks and expanding here-documents). */
  nested: string[];
  /** Constructs this reader does not follow exactly; any entry makes the line dynamic. */
  problems: string[];
}

const MAX_DEPTH = 32;
const BLANK = new Set([" ", "\t"]);
const OPERATORS = [
  ";;&",
  "&>>",
  "<<<",
  "<<-",
  ";;",
  ";&",
  "&&",
  "||",
  "|&",
  "&>",
  "<<",
  "<>",
  "<&",
  ">&",
  ">>",
  ">|",
  ";",
  "&",
  "|",
  "(",
  ")",
  "<",
  ">",
];
const OP_START = new Set(";&|()<>");
const REDIRECTS = new Set([
  "<",
  ">",
  ">>",
  ">|",
  "<>",
  "&>",
  "&>>",
  ">&",
  "<&",
  "<<",
  "<<-",
  "<<<",
]);
/** Reserved words after which a new command starts. */
const PREFIX_WORDS = new Set(["{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done"]);
/** (`time` is not here: bash's `time -p cmd` and dash's /usr/bin/time are read as a wrapper.) */
const LOOP_WORDS = new Set(["while", "until", "esac"]);
/** Reserved words that end a compound command. */
const CLOSERS = new Set(["}", "fi", "done", "esac"]);
/** `$?` `$#` `$$` `$!` `$-` expand to numbers or flags, never to a path or a command. */
const HARMLESS_SPECIAL = new Set(["?", "#", "$", "!", "-"]);

interface HereDoc {
  delimiter: string;
  strip: boolean;
  expands: boolean;
  /** The redirection the body belongs to (its `body` is set once read). */
  redirect: Redirect;
}

interface Parser {
  src: string;
  pos: number;
  out: ShellParse;
  depth: number;
  heredocs: HereDoc[];
}

/** Parses `line` as sh would; never throws. */
export function parseShell(line: string): ShellParse {
  const out: ShellParse = { commands: [], nested: [], problems: [] };
  parseInto(line, out, 0);
  out.problems = [...new Set(out.problems)];
  return out;
}

function parseInto(src: string, out: ShellParse, depth: number): void {
  const p: Parser = { src, pos: 0, out, depth, heredocs: [] };
  if (depth > MAX_DEPTH) {
    out.problems.push("nesting too deep");
    return;
  }
  parseList(p, false);
  if (p.pos < src.length) out.problems.push("unbalanced )");
}

/** The state of one command list being read (the top level or a substitution's). */
interface List {
  cmd: ShellCommand;
  pending: { op: string; fd?: number } | undefined;
  parens: number;
  // Inside `case … in`: words up to `)` are patterns, not commands. Anything that is not
  // the shape of a pattern list is a problem (sh would refuse the line).
  caseDepth: number;
  casePattern: boolean;
  patternWord: boolean;
  nextStdin: ShellCommand["stdin"];
}

/** Reads commands until the end, or (inSubst) until the `)` closing a substitution. */
function parseList(p: Parser, inSubst: boolean): void {
  const l: List = {
    cmd: newCommand(),
    pending: undefined,
    parens: 0,
    caseDepth: 0,
    casePattern: false,
    patternWord: false,
    nextStdin: undefined,
  };
  while (p.pos < p.src.length) {
    const c = p.src[p.pos] as string;
    if (BLANK.has(c)) {
      p.pos++;
    } else if (c === "\\" && p.src[p.pos + 1] === "\n") {
      p.pos += 2;
    } else if (c === "#") {
      while (p.pos < p.src.length && p.src[p.pos] !== "\n") p.pos++;
    } else if (c === "\n") {
      if (l.patternWord) p.out.problems.push("case pattern without )");
      flush(p, l);
      p.pos++;
      readHereDocs(p);
    } else if (OP_START.has(c) && !isProcessSubstitution(p)) {
      if (operator(p, l, inSubst) === "end") return;
    } else {
      const redirect = fdRedirect(p);
      if (redirect !== undefined) {
        if (l.pending !== undefined) p.out.problems.push(`${l.pending.op} without a target`);
        l.pending = redirect;
      } else word(p, l, readWord(p));
    }
  }
  flush(p, l);
  if (inSubst) p.out.problems.push("unterminated $(…)");
}

/** Ends the current simple command. */
function flush(p: Parser, l: List): void {
  if (l.pending !== undefined) p.out.problems.push(`${l.pending.op} without a target`);
  l.pending = undefined;
  const cmd = l.cmd;
  if (cmd.words.length > 0 || cmd.assignments.length > 0 || cmd.redirects.length > 0) {
    if (cmd.stdin === undefined && l.nextStdin !== undefined) cmd.stdin = l.nextStdin;
    p.out.commands.push(cmd);
  }
  l.cmd = newCommand();
  l.nextStdin = undefined;
}

/** An operator at p.pos; "end" when it closes the substitution being read. */
function operator(p: Parser, l: List, inSubst: boolean): "end" | undefined {
  const op = OPERATORS.find((o) => p.src.startsWith(o, p.pos)) as string;
  p.pos += op.length;
  if (REDIRECTS.has(op)) {
    if (l.pending !== undefined) p.out.problems.push(`${l.pending.op} without a target`);
    l.pending = { op };
    return undefined;
  }
  if (l.casePattern && (op === "|" || op === "(")) {
    l.patternWord = false;
    return undefined;
  }
  if (op === ")") {
    if (l.casePattern) {
      l.casePattern = false;
      l.patternWord = false;
    } else if (l.parens > 0) l.parens--;
    else if (inSubst) {
      flush(p, l);
      return "end";
    } else p.out.problems.push("unbalanced )");
    flush(p, l);
    l.cmd.group = true;
    return undefined;
  }
  if (op === "(") {
    if (l.cmd.words.length === 1 && /^[ \t]*\)/.test(p.src.slice(p.pos, p.pos + 64))) {
      // `name() …`: a function definition; its body is read as ordinary commands.
      p.pos = p.src.indexOf(")", p.pos) + 1;
      l.cmd = newCommand();
      return undefined;
    }
    if (p.src[p.pos] === "(") p.out.problems.push("(( … )) arithmetic command");
    if (l.cmd.words.length > 0) p.out.problems.push("( inside a command");
    l.parens++;
  }
  flush(p, l);
  if (op === "|" || op === "|&") l.nextStdin = "pipe";
  if (op === ";;" || op === ";&" || op === ";;&") {
    if (l.caseDepth === 0) p.out.problems.push(`${op} outside case`);
    l.casePattern = true;
  }
  return undefined;
}

/** A word: a redirection's target, a case pattern, a reserved word, an assignment or an argument. */
function word(p: Parser, l: List, w: ShellWord): void {
  const cmd = l.cmd;
  if (l.pending !== undefined) {
    attachRedirect(p, cmd, l.pending, w);
    l.pending = undefined;
  } else if (l.casePattern && !l.patternWord && w.text === "esac" && !w.quoted) {
    cmd.group = true;
    l.casePattern = false;
    l.caseDepth = Math.max(0, l.caseDepth - 1);
  } else if (l.casePattern && !l.patternWord) {
    l.patternWord = true;
  } else if (l.casePattern) {
    p.out.problems.push("case pattern without )");
    l.casePattern = false;
    l.patternWord = false;
    cmd.words.push(w);
  } else if (cmd.words.length === 0 && cmd.assignments.length === 0 && !w.quoted) {
    reserved(p, cmd, w);
  } else if (cmd.words.length === 0 && isAssignment(w)) {
    cmd.assignments.push(w);
  } else {
    cmd.words.push(w);
    const head = cmd.words[0] as ShellWord;
    if (cmd.words.length === 3 && head.text === "case" && !head.quoted && w.text === "in") {
      flush(p, l);
      l.caseDepth++;
      l.casePattern = true;
    }
  }
}

function newCommand(): ShellCommand {
  return { assignments: [], words: [], redirects: [] };
}

/** The first word of a command: a reserved word starts the next command, else it is kept. */
function reserved(p: Parser, cmd: ShellCommand, w: ShellWord): void {
  if (CLOSERS.has(w.text)) cmd.group = true;
  if (PREFIX_WORDS.has(w.text) || LOOP_WORDS.has(w.text)) return;
  if (w.text === "function") {
    // `function NAME { …; }`: the name is not a command; the body is.
    readBlanks(p);
    if (p.pos < p.src.length && !OP_START.has(p.src[p.pos] as string)) readWord(p);
    return;
  }
  if (w.text === "[[" || w.text === "coproc" || w.text === "select")
    p.out.problems.push(`${w.text} (bash)`);
  if (w.text === "coproc") return;
  if (isAssignment(w)) cmd.assignments.push(w);
  else cmd.words.push(w);
}

function readBlanks(p: Parser): void {
  while (BLANK.has(p.src[p.pos] as string)) p.pos++;
}

/** `NAME=…` (or bash's `NAME[i]=…`, `NAME+=…`) with the name unquoted. */
function isAssignment(w: ShellWord): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(w.pattern);
}

function isProcessSubstitution(p: Parser): boolean {
  const c = p.src[p.pos];
  return (c === "<" || c === ">") && p.src[p.pos + 1] === "(";
}

/** Digits directly followed by a redirection are its file descriptor (`2>/dev/null`). */
function fdRedirect(p: Parser): { op: string; fd: number } | undefined {
  const m = /^(\d{1,9})(?=[<>])/.exec(p.src.slice(p.pos, p.pos + 12));
  if (m === null) return undefined;
  const digits = m[1] as string;
  const op = OPERATORS.find((o) => p.src.startsWith(o, p.pos + digits.length));
  if (op === undefined || !REDIRECTS.has(op)) return undefined;
  p.pos += digits.length + op.length;
  return { op, fd: Number(digits) };
}

function attachRedirect(
  p: Parser,
  cmd: ShellCommand,
  pending: { op: string; fd?: number },
  target: ShellWord,
): void {
  const op = pending.op;
  const r: Redirect = { op, target, ...(pending.fd === undefined ? {} : { fd: pending.fd }) };
  cmd.redirects.push(r);
  const fd = pending.fd ?? (op.startsWith("<") ? 0 : 1);
  if (op === "<<" || op === "<<-") {
    p.heredocs.push({
      delimiter: target.text,
      strip: op === "<<-",
      expands: !target.quoted,
      redirect: r,
    });
    if (fd === 0) cmd.stdin = "heredoc";
  } else if (op === "<<<") {
    if (fd === 0) cmd.stdin = "herestring";
  } else if ((op === "<" || op === "<>") && fd === 0) {
    cmd.stdin = "file";
  } else if (op === "<&" && fd === 0 && target.text !== "-") {
    cmd.stdin = "file";
  }
}

/** Reads the bodies of the here-documents opened on the line just ended. */
function readHereDocs(p: Parser): void {
  for (const h of p.heredocs) {
    const lines: string[] = [];
    for (;;) {
      if (p.pos >= p.src.length) break;
      const nl = p.src.indexOf("\n", p.pos);
      const end = nl < 0 ? p.src.length : nl;
      let line = p.src.slice(p.pos, end);
      p.pos = nl < 0 ? p.src.length : nl + 1;
      if (h.strip) line = line.replace(/^\t+/, "");
      if (line === h.delimiter) break;
      lines.push(line);
    }
    const body = lines.join("\n");
    h.redirect.body = body;
    // An unquoted delimiter expands the body: substitutions in it run.
    if (h.expands && /`|\$\(|\$\{|\$\[/.test(body)) {
      p.out.problems.push("substitution in a here-document");
      p.out.nested.push(body);
    }
  }
  p.heredocs = [];
}

/** Reads one word at p.pos (not at a blank or an operator). */
function readWord(p: Parser): ShellWord {
  const w: ShellWord = {
    text: "",
    pattern: "",
    glob: false,
    brace: false,
    tilde: false,
    expansions: [],
    quoted: false,
  };
  const start = p.pos;
  const lit = (s: string, quoted: boolean): void => {
    w.text += s;
    w.pattern += quoted ? s.replace(/[\\*?[\]{},~]/g, "\\$&") : s;
    if (quoted) w.quoted = true;
  };
  while (p.pos < p.src.length) {
    const c = p.src[p.pos] as string;
    if (BLANK.has(c) || c === "\n") break;
    if (OP_START.has(c)) {
      if (!isProcessSubstitution(p)) break;
      w.expansions.push("process substitution");
      w.text += c;
      w.pattern += c;
      p.pos++;
      substitution(p, w);
      continue;
    }
    if (c === "\\") {
      const n = p.src[p.pos + 1];
      p.pos += 2;
      if (n === "\n") continue;
      lit(n ?? "\\", true);
    } else if (c === "'") {
      const end = p.src.indexOf("'", p.pos + 1);
      if (end < 0) p.out.problems.push("unterminated '");
      lit(p.src.slice(p.pos + 1, end < 0 ? undefined : end), true);
      w.quoted = true;
      p.pos = end < 0 ? p.src.length : end + 1;
    } else if (c === '"') {
      p.pos++;
      doubleQuoted(p, w, lit);
    } else if (c === "$") {
      dollar(p, w, lit, false);
    } else if (c === "`") {
      backtick(p, w);
    } else {
      if (c === "*" || c === "?" || (c === "[" && /^\[[^\s]*\]/.test(p.src.slice(p.pos)))) {
        w.glob = true;
      }
      if (c === "~" && p.pos === start) w.tilde = true;
      lit(c, false);
      p.pos++;
    }
  }
  w.brace = hasBraceExpansion(w.pattern);
  return w;
}

function doubleQuoted(p: Parser, w: ShellWord, lit: (s: string, q: boolean) => void): void {
  w.quoted = true;
  while (p.pos < p.src.length) {
    const c = p.src[p.pos] as string;
    if (c === '"') {
      p.pos++;
      return;
    }
    if (c === "\\") {
      const n = p.src[p.pos + 1];
      p.pos += 2;
      if (n === "\n") continue;
      if (n === "$" || n === "`" || n === '"' || n === "\\") lit(n, true);
      else lit(`\\${n ?? ""}`, true);
    } else if (c === "$") {
      dollar(p, w, lit, true);
    } else if (c === "`") {
      backtick(p, w);
    } else {
      lit(c, true);
      p.pos++;
    }
  }
  p.out.problems.push('unterminated "');
}

function dollar(
  p: Parser,
  w: ShellWord,
  lit: (s: string, q: boolean) => void,
  inDouble: boolean,
): void {
  const rest = p.src.slice(p.pos + 1, p.pos + 260);
  const n = rest[0];
  const mark = (kind: string, text: string): void => {
    w.expansions.push(kind);
    w.text += text;
    w.pattern += text;
  };
  if (n === "'" && !inDouble) {
    // bash decodes $'…'; dash reads `$` then a quoted string: the two disagree.
    const end = findQuoteEnd(p.src, p.pos + 2);
    const body = p.src.slice(p.pos + 2, end);
    p.pos = end + 1;
    w.expansions.push("$'…' quoting");
    lit(decodeAnsiC(body), true);
  } else if (n === '"' && !inDouble) {
    w.expansions.push('$"…" quoting');
    p.pos += 2;
    doubleQuoted(p, w, lit);
  } else if (n === "(" && rest[1] === "(") {
    const end = findClose(p.src, p.pos + 3, "(", ")", 2);
    const inner = p.src.slice(p.pos + 3, Math.max(p.pos + 3, end - 1));
    p.pos = end + 1;
    mark("arithmetic $((…))", `$((${inner}))`);
    p.out.nested.push(inner);
  } else if (n === "(") {
    p.pos++;
    w.text += "$";
    w.pattern += "$";
    w.expansions.push("command substitution $(…)");
    substitution(p, w);
  } else if (n === "{") {
    const end = findClose(p.src, p.pos + 2, "{", "}", 1);
    const inner = p.src.slice(p.pos + 2, end);
    p.pos = end + 1;
    mark(`parameter \${${inner.slice(0, 40)}}`, `\${${inner}}`);
    if (/[`$]/.test(inner)) p.out.nested.push(inner);
  } else if (n === "[") {
    const end = findClose(p.src, p.pos + 2, "[", "]", 1);
    const inner = p.src.slice(p.pos + 2, end);
    p.pos = end + 1;
    mark("arithmetic $[…]", `$[${inner}]`);
    p.out.nested.push(inner);
  } else if (n !== undefined && /[A-Za-z_]/.test(n)) {
    const name = (/^[A-Za-z_][A-Za-z0-9_]*/.exec(rest) as RegExpExecArray)[0];
    const placeholder = name === "ENV" ? /^ENV\.[A-Z_][A-Z0-9_]*/.exec(rest) : null;
    p.pos += 1 + (placeholder?.[0] ?? name).length;
    // $ENV.NAME is agentd's secret placeholder: replaced by the kernel before the shell runs.
    if (placeholder !== null) lit(`$${placeholder[0]}`, true);
    else mark(`parameter $${name}`, `$${name}`);
  } else if (n !== undefined && /[0-9@*#?$!-]/.test(n)) {
    p.pos += 2;
    if (HARMLESS_SPECIAL.has(n)) lit(`$${n}`, true);
    else mark(`parameter $${n}`, `$${n}`);
  } else {
    lit("$", true);
    p.pos++;
  }
}

/** Parses the code of `$(…)`, `<(…)` or `>(…)` (p.pos at the `(`) into the same output. */
function substitution(p: Parser, w: ShellWord): void {
  const from = p.pos + 1;
  if (p.depth >= MAX_DEPTH) {
    p.out.problems.push("nesting too deep");
    p.pos = findClose(p.src, from, "(", ")", 1) + 1;
  } else {
    const inner: Parser = { src: p.src, pos: from, out: p.out, depth: p.depth + 1, heredocs: [] };
    parseList(inner, true);
    p.pos = inner.pos;
  }
  const text = `(${p.src.slice(from, p.pos)}`;
  w.text += text;
  w.pattern += text;
}

function backtick(p: Parser, w: ShellWord): void {
  let i = p.pos + 1;
  let inner = "";
  while (i < p.src.length && p.src[i] !== "`") {
    if (p.src[i] === "\\" && /[\\`$]/.test(p.src[i + 1] ?? "")) {
      inner += p.src[i + 1];
      i += 2;
    } else {
      inner += p.src[i];
      i++;
    }
  }
  if (i >= p.src.length) p.out.problems.push("unterminated `");
  w.expansions.push("command substitution `…`");
  w.text += `\`${inner}\``;
  w.pattern += `\`${inner}\``;
  p.pos = i + 1;
  parseInto(inner, p.out, p.depth + 1);
}

/** Index of the closer matching an opener already read (`open` deep), respecting quotes. */
function findClose(src: string, from: number, open: string, close: string, deep: number): number {
  let depth = deep;
  for (let i = from; i < src.length; i++) {
    const c = src[i];
    if (c === "\\") i++;
    else if (c === "'") i = findQuoteEnd(src, i + 1);
    else if (c === open) depth++;
    else if (c === close && --depth === 0) return i;
  }
  return src.length;
}

function findQuoteEnd(src: string, from: number): number {
  for (let i = from; i < src.length; i++) {
    if (src[i] === "\\") i++;
    else if (src[i] === "'") return i;
  }
  return src.length;
}

/** bash's $'…' escapes, enough to show what a word spells (\x72m is rm). */
function decodeAnsiC(body: string): string {
  return body.replace(
    /\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/g,
    (_, e: string) => {
      const k = e[0];
      if (k === "x" || k === "u" || k === "U")
        return safeCodePoint(Number.parseInt(e.slice(1), 16));
      if (k !== undefined && /[0-7]/.test(k)) return safeCodePoint(Number.parseInt(e, 8));
      const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", a: "\x07", b: "\b" };
      return simple[e] ?? (k === "c" ? "" : e === "e" || e === "E" ? "\x1b" : e);
    },
  );
}

function safeCodePoint(n: number): string {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : "";
}

/** An unescaped `{…,…}` or `{x..y}` in a glob-form word. */
export function hasBraceExpansion(pattern: string): boolean {
  if (!pattern.includes("{")) return false;
  let depth = 0;
  let sep = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}" && depth > 0) {
      if (sep) return true;
      depth--;
    } else if (depth > 0 && (c === "," || (c === "." && pattern[i + 1] === "."))) sep = true;
  }
  return false;
}
