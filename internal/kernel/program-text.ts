/**
 * What an awk program or a sed script given on the command line can do beyond filtering
 * text: run commands, read or write files. awk: `system(`, pipes to and from commands
 * (`print | "cmd"`, `"cmd" | getline`), `getline` (which also reads arbitrary files),
 * output redirection (`print > "f"`), gawk's `@load`/`@include`. sed: the `e` command and
 * the `s///e` flag, `w`/`W` writes (also `s///w`), `r`/`R` reads; a script is ordinary only
 * when every command in it is one of the plain text commands. Pure; never throws.
 */

/** Why an awk program is not plain text filtering, or undefined when it is. */
export function awkProgramRisk(program: string): string | undefined {
  // Strings may hold anything; a regex literal may hold "|" and ">".
  const code = stripAwkRegexes(program.replace(/"(?:[^"\\\n]|\\.)*"/g, '""'));
  if (/\bsystem\s*\(/.test(code)) return "awk system()";
  if (/\bgetline\b/.test(code)) return "awk getline";
  if (/@\s*(load|include|namespace)\b/.test(code)) return "awk @load/@include";
  if (/(^|[^|])\|(?!\|)/.test(code)) return "awk pipe to or from a command";
  if (/\bprintf?\b[^;{}\n]*>/.test(code)) return "awk output redirection";
  if (/\b(fflush|close)\s*\(\s*[^)]/.test(code) && /\|/.test(code)) return "awk pipe";
  return undefined;
}

/** Removes /regex/ literals where an operand is expected (start, after ( , { ; ! ~ & | newline). */
function stripAwkRegexes(code: string): string {
  let out = "";
  let expectOperand = true;
  for (let i = 0; i < code.length; i++) {
    const c = code[i] as string;
    if (c === "/" && expectOperand) {
      let j = i + 1;
      let inClass = false;
      for (; j < code.length; j++) {
        const d = code[j];
        if (d === "\\") j++;
        else if (d === "[") inClass = true;
        else if (d === "]") inClass = false;
        else if (d === "/" && !inClass) break;
        else if (d === "\n") break;
      }
      out += "//";
      i = j;
      expectOperand = false;
      continue;
    }
    out += c;
    if (!/\s/.test(c)) expectOperand = /[(,{};!~&|\n=]/.test(c);
  }
  return out;
}

/** sed commands that only transform the text stream. */
const PLAIN_SED = new Set("pdDnNPgGhHxlqQz=F{}".split(""));
const LABELLED = new Set(["b", "t", "T", ":"]);
const TEXT = new Set(["a", "i", "c"]);

/**
 * Why a sed script is not plain text editing, or undefined when it is. `seen`, when given,
 * collects the script's commands (one letter each; "s*" for a substitution of every line's
 * whole text by nothing: `s` of `.*` with an empty replacement), for sedDeletes().
 */
export function sedScriptRisk(script: string, seen?: Set<string>): string | undefined {
  let i = 0;
  const s = script;
  const skipBlanks = (): void => {
    while (i < s.length && /[\s;]/.test(s[i] as string)) i++;
  };
  for (let guard = 0; guard < 100_000; guard++) {
    skipBlanks();
    if (i >= s.length) return undefined;
    if (s[i] === "#") {
      while (i < s.length && s[i] !== "\n") i++;
      continue;
    }
    i = skipAddress(s, i);
    if (i < 0) return "sed address the analysis does not follow";
    while (i < s.length && /[\s!]/.test(s[i] as string)) i++;
    const c = s[i];
    if (c === undefined) return undefined;
    seen?.add(c);
    i++;
    if (c === "s" || c === "y") {
      const r = substitution(s, i);
      if (typeof r === "string") return r;
      if (c === "s" && wipesLine(s, i)) seen?.add("s*");
      i = r;
      if (c === "s") {
        const flags = /^[gpiImM0-9]*/.exec(s.slice(i))?.[0] ?? "";
        i += flags.length;
        const next = s[i];
        if (next === "e") return "sed s///e runs the pattern space as a command";
        if (next === "w" || next === "W") return "sed s///w writes a file";
        if (next !== undefined && !/[\s;}#]/.test(next)) return `sed s flag ${next}`;
      }
    } else if (LABELLED.has(c) || TEXT.has(c)) {
      // A label or a/i/c text runs to the end of the line (GNU one-liner forms included).
      if (TEXT.has(c) || c === ":") while (i < s.length && s[i] !== "\n") i++;
      else while (i < s.length && s[i] !== "\n" && s[i] !== ";" && s[i] !== "}") i++;
    } else if (c === "e") return "sed e runs a command";
    else if (c === "w" || c === "W") return "sed w writes a file";
    else if (c === "r" || c === "R") return "sed r reads a file";
    else if (c === "v") while (i < s.length && s[i] !== "\n" && s[i] !== ";") i++;
    else if (!PLAIN_SED.has(c)) return `sed command ${c}`;
    else if (c === "l" || c === "q" || c === "Q") i += /^\s*\d*/.exec(s.slice(i))?.[0].length ?? 0;
  }
  return "sed script too long";
}

/** Commands that remove lines or their text: d D z c q Q, and `s` of `.*` by nothing. */
const DELETING = ["d", "D", "z", "c", "q", "Q", "s*"];

/**
 * Whether a sed script can drop lines or their text (with -i: empties or cuts the file):
 * a deleting command anywhere in it, or a script the reader cannot follow.
 */
export function sedDeletes(script: string): boolean {
  const seen = new Set<string>();
  if (sedScriptRisk(script, seen) !== undefined) return true;
  return DELETING.some((c) => seen.has(c));
}

/** s/RE//: RE matches any whole line (`.*`, `^.*$`, `\(.*\)`…) and the replacement is empty. */
function wipesLine(s: string, from: number): boolean {
  const delim = s[from] as string;
  const end = findDelimiter(s, from + 1, delim);
  const re = s.slice(from + 1, end);
  const replacement = s.slice(end + 1, findDelimiter(s, end + 1, delim, false));
  return replacement === "" && /^\^?(\\?\()?\.\*(\\?\))?\$?$/.test(re);
}

/** Past an address or address range; -1 when it cannot be read. */
function skipAddress(s: string, from: number): number {
  let i = from;
  for (let part = 0; part < 2; part++) {
    const m = /^(\d+(~\d+)?|\$|\+\d+|~\d+)/.exec(s.slice(i));
    if (m !== null) i += m[0].length;
    else if (s[i] === "/" || s[i] === "\\") {
      const delim = s[i] === "\\" ? s[i + 1] : "/";
      if (delim === undefined || delim === "\n") return -1;
      i += s[i] === "\\" ? 2 : 1;
      const end = findDelimiter(s, i, delim);
      if (end < 0) return -1;
      i = end + 1;
      while (s[i] === "I" || s[i] === "M") i++;
    } else if (part === 1) return -1;
    else return i;
    if (s[i] !== ",") return i;
    i++;
  }
  return i;
}

/** Past the pattern and replacement of s/…/…/ or y/…/…/ (i at the delimiter). */
function substitution(s: string, from: number): number | string {
  const delim = s[from];
  if (delim === undefined || delim === "\n" || delim === "\\") return "sed s delimiter";
  let i = from + 1;
  for (let k = 0; k < 2; k++) {
    const end = findDelimiter(s, i, delim, k === 0);
    if (end < 0) return "sed unterminated s command";
    i = end + 1;
  }
  return i;
}

/**
 * The index of the delimiter ending a regex or replacement. In a regex (GNU and busybox sed
 * alike) a bracket expression may hold the delimiter: `s/[/]/x/` is one substitution.
 */
function findDelimiter(s: string, from: number, delim: string, regex = true): number {
  for (let i = from; i < s.length; i++) {
    const c = s[i];
    if (c === "\\") i++;
    else if (c === "[" && regex) i = bracketEnd(s, i);
    else if (c === delim) return i;
    else if (c === "\n") return -1;
  }
  return -1;
}

/** The "]" closing a bracket expression opened at i (a leading "]" or "^]" is literal). */
function bracketEnd(s: string, i: number): number {
  let j = i + 1;
  if (s[j] === "^") j++;
  if (s[j] === "]") j++;
  for (; j < s.length && s[j] !== "\n"; j++) {
    if (s[j] === "[" && /[:.=]/.test(s[j + 1] ?? "")) {
      const close = s.indexOf(`${s[j + 1]}]`, j + 2);
      if (close < 0) return s.length;
      j = close + 1;
    } else if (s[j] === "]") return j;
  }
  return s.length;
}
