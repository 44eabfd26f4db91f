/**
 * Ways of emptying or replacing a file, for the analysis: each is reported as destructive,
 * as `truncate` and `dd of=` are, so a person sees it.
 * - A truncating redirection (`>`, `>|`, `&>`, any descriptor) of a command that writes
 *   nothing (`> f`, `: > f`, `true > f`, `exec > f`, `echo > f`, `echo -n > f`,
 *   `printf '' > f`) or reads only an empty input (`cat /dev/null > f`, `cat < /dev/null >
 *   f`, `cat > f` with no input at all).
 * - A redirection onto a file the same command reads (`sort f > f`: the shell empties f
 *   before sort reads it).
 * - A redirection of a program whose output the line does not show (`awk 'BEGIN{}' > f`,
 *   `diff a a > f`, `python3 gen.py > f`): listed as `unseen`; the container tells whether
 *   it replaces a non-empty file of the uploaded workspace (replace-probe.ts).
 * - tee and sponge without -a; `ln -f` (replaces the target with a link: `ln -sf /dev/null
 *   f`); install from /dev/null; sed -i whose script deletes lines (d, D, z, c, q, Q, `s` of
 *   `.*` by nothing), with -n, or with a script file the line does not show.
 * Writing content into a file (`echo hi > out.txt`, `sed -i s/a/b/`) stays ordinary: the
 * change shows in the run's diff. Pure; reports through `Effects` or returns reasons; never
 * knows about other families.
 */
import type { Effects, Family, Invocation } from "./command-effects.ts";
import { sedDeletes } from "./program-text.ts";
import type { Redirect, ShellCommand, ShellWord } from "./shell-syntax.ts";

/** Devices that read as empty (or endless zeros): a file made from one loses its content. */
export const EMPTY_SOURCES: ReadonlySet<string> = new Set(["/dev/null", "/dev/zero"]);

/** Redirections that truncate their target (`>>`, `&>>` append; `<>` opens without truncating). */
const TRUNCATING = new Set([">", ">|", "&>", ">&"]);

/** Builtins and programs that never write to standard output. */
const NO_OUTPUT = new Set(
  (
    ": true false exit return sleep touch mkdir cd test [ export unset shift wait umask " +
    "read ulimit alias unalias"
  ).split(" "),
);

/** Programs that copy their input (files, else stdin) to stdout, changed or not. */
const READERS = new Set(
  (
    "cat tac head tail sort uniq base64 base32 rev nl fold fmt od xxd hexdump strings expand " +
    "unexpand cut paste gzip gunzip zcat bzcat xzcat zstdcat dos2unix unix2dos iconv"
  ).split(" "),
);

/** Wrappers whose redirection is the wrapped command's (`command true > f`, `nice : > f`). */
const PASS_THROUGH = new Set(["command", "builtin", "exec", "env", "nohup", "nice", "time"]);

/**
 * Why the redirections of `cmd` empty a file (`reasons`, none: empty), and the files a
 * copying reader writes into a truncated file (`inputs`: `cat A B > F` empties F when A and
 * B are empty, which only the container can tell).
 */
export function emptyingRedirects(cmd: ShellCommand): {
  reasons: string[];
  inputs?: { from: ShellWord[]; to: ShellWord };
  unseen: ShellWord[];
} {
  const reasons: string[] = [];
  const unseen: ShellWord[] = [];
  let inputs: { from: ShellWord[]; to: ShellWord } | undefined;
  const words = unwrapped(cmd.words);
  const input = stdinFile(cmd);
  cmd.redirects.forEach((r, i) => {
    if (!TRUNCATING.has(r.op)) return;
    const t = r.target.text;
    if (t.startsWith("/dev/") || (r.op === ">&" && /^(\d+-?|-)$/.test(t))) return;
    const shown = t.slice(0, 80);
    if (overridden(cmd.redirects, i))
      reasons.push(
        `${r.op} ${shown} (a later redirection takes its descriptor: the file is emptied)`,
      );
    else if (!cmd.group && writesNothing(words, cmd.stdin, input))
      reasons.push(`${r.op} ${shown} (empties the file)`);
    else if (!cmd.group && (r.fd ?? 1) !== 1 && r.op !== "&>")
      // Descriptor 2, 3…: whether the command writes anything there the line cannot show.
      unseen.push(r.target);
    else if (readsTarget(words, r.target))
      reasons.push(
        `${words[0]?.text ?? ""} … ${r.op} ${shown} (the shell empties it before it is read)`,
      );
    else {
      const from = !cmd.group && (r.fd ?? 1) === 1 ? readerInputs(words, cmd) : [];
      if (from.length > 0) inputs = { from, to: r.target };
      else if (cmd.group || !showsOutput(words, cmd)) unseen.push(r.target);
    }
  });
  return { reasons, unseen, ...(inputs === undefined ? {} : { inputs }) };
}

/** The descriptor a redirection sets (`2>`: 2; `>`, `>&`: 1; `<`, `<&`: 0). */
const fdOf = (r: Redirect): number => r.fd ?? (r.op.startsWith("<") ? 0 : 1);

/** Whether a later redirection of the same descriptor takes what the `i`th one would get. */
function overridden(redirects: readonly Redirect[], i: number): boolean {
  const r = redirects[i] as Redirect;
  const fds = r.op === "&>" ? [1, 2] : [fdOf(r)];
  return fds.every((fd) =>
    redirects.slice(i + 1).some((x) => fdOf(x) === fd || (x.op === "&>" && fd <= 2)),
  );
}

/**
 * True when the line itself shows what the command writes (`echo text`, `printf 'text'`, a
 * reader of a here-document): replacing a file with it shows in the line and in the diff.
 */
function showsOutput(words: readonly ShellWord[], cmd: ShellCommand): boolean {
  const head = words[0];
  if (head === undefined) return false;
  const name = baseName(head);
  const args = words.slice(1).map((w) => w.text);
  if (name === "echo") return args.some((a) => a !== "" && !/^-[neE]+$/.test(a));
  if (name === "printf") return args.length > 0 && args[0] !== "";
  return READERS.has(name) && (cmd.stdin === "heredoc" || cmd.stdin === "herestring");
}

/** The files a copying reader (cat, head, sort…) reads: its operands, else its `<` file. */
function readerInputs(words: readonly ShellWord[], cmd: ShellCommand): ShellWord[] {
  const head = words[0];
  if (head === undefined || !READERS.has(baseName(head))) return [];
  const takes = VALUE_OPTIONS[baseName(head)] ?? "";
  const operands: ShellWord[] = [];
  const args = words.slice(1);
  for (let i = 0; i < args.length; i++) {
    const t = (args[i] as ShellWord).text;
    // `sort -t x`, `cut -d x`, `sort -T dir`: the next word is the option's value, no input.
    if (/^-[A-Za-z]+$/.test(t) && takes.includes(t.at(-1) as string)) i++;
    else if (!t.startsWith("-") && !/^\d+$/.test(t)) operands.push(args[i] as ShellWord);
  }
  if (operands.length > 0) return operands;
  const r = cmd.redirects.find((x) => x.op === "<" && (x.fd ?? 0) === 0);
  return r === undefined ? [] : [r.target];
}

/**
 * Short options whose value may be the next word, per reader (the last letter of a bundle
 * takes it: `sort -rt x`). A value attached (`-tx`) is one word, left out as an option.
 */
const VALUE_OPTIONS: Record<string, string> = {
  sort: "tkToSy",
  cut: "dfbc",
  head: "nc",
  tail: "ncs",
  uniq: "fsw",
  fold: "w",
  fmt: "wgp",
  nl: "bdfhilnpsvw",
  od: "AjNSstw",
  xxd: "cglos",
  hexdump: "enFs",
  strings: "not",
  expand: "t",
  unexpand: "t",
  paste: "d",
  iconv: "fto",
  base64: "w",
  base32: "w",
};

/** The command behind simple wrappers and their options (`nice -n 5 true` → `true`). */
function unwrapped(words: readonly ShellWord[]): readonly ShellWord[] {
  let k = 0;
  while (k < words.length && PASS_THROUGH.has(baseName(words[k] as ShellWord))) {
    k++;
    while (k < words.length && /^(-.*|\d+|\w+=.*)$/.test((words[k] as ShellWord).text)) k++;
  }
  return words.slice(k);
}

function baseName(w: ShellWord): string {
  return w.text.slice(w.text.lastIndexOf("/") + 1);
}

function stdinFile(cmd: ShellCommand): string | undefined {
  const r = cmd.redirects.find((x) => x.op === "<" && (x.fd ?? 0) === 0);
  if (r !== undefined) return r.target.text;
  // An empty here-document (`cat > f <<EOF` then `EOF`) is input of nothing, as /dev/null.
  const doc = cmd.redirects.findLast((x) => (x.op === "<<" || x.op === "<<-") && (x.fd ?? 0) === 0);
  return doc?.body === "" ? "/dev/null" : undefined;
}

/** True when the command writes nothing to standard output. */
function writesNothing(
  words: readonly ShellWord[],
  stdin: ShellCommand["stdin"],
  input: string | undefined,
): boolean {
  const head = words[0];
  if (head === undefined) return true;
  const name = baseName(head);
  const args = words.slice(1).map((w) => w.text);
  if (NO_OUTPUT.has(name)) return true;
  // `echo > f` leaves one newline, `echo -n > f` nothing: either way the content is gone.
  if (name === "echo") return args.every((a) => a === "" || /^-[neE]+$/.test(a));
  if (name === "printf")
    return (
      args.length === 0 ||
      /^(%\.0[sb])+$/.test(args[0] as string) ||
      (/^(%[sb]|\\c)*$/.test(args[0] as string) && args.slice(1).every((a) => a === ""))
    );
  if (name === "dd") return args.includes("if=/dev/null") && !args.some((a) => a.startsWith("of="));
  if (!READERS.has(name)) return false;
  if ((name === "head" || name === "tail") && zeroCount(args)) return true;
  // Operands: the arguments that are not options nor an option's number (head -n 5).
  const operands = args.filter((a) => !a.startsWith("-") && !/^\d+$/.test(a));
  // /dev/zero is not empty here: `head -c 1M /dev/zero > f` writes a megabyte.
  if (operands.length > 0) return operands.every((a) => a === "/dev/null");
  // No operand: the command reads its standard input, empty unless piped or given text.
  if (input !== undefined) return input === "/dev/null";
  return stdin === undefined;
}

/** `head -c 0`, `-n0`, `--bytes=0`, `--lines 0`: a count of nothing. */
function zeroCount(args: readonly string[]): boolean {
  return args.some(
    (a, k) =>
      /^-[cn]\+?0+$/.test(a) ||
      /^--(bytes|lines)=\+?0+$/.test(a) ||
      (/^(-[cn]|--bytes|--lines)$/.test(a) && /^\+?0+$/.test(args[k + 1] ?? "")),
  );
}

/** `sort f > f`, `grep x f > f`: the command reads the file its redirection empties. */
function readsTarget(words: readonly ShellWord[], target: ShellWord): boolean {
  const name = words[0] === undefined ? "" : baseName(words[0]);
  if (name === "" || name === "echo" || name === "printf" || name === "touch") return false;
  const norm = (p: string): string => p.replace(/^(\.\/)+/, "");
  const t = norm(target.text);
  return words.slice(1).some((w) => norm(w.text) === t && w.expansions.length === 0);
}

/** tee FILE… and sponge FILE empty each FILE first unless told to append (-a). */
function teeLike(inv: Invocation, fx: Effects): void {
  fx.writer();
  let append = false;
  let options = true;
  const files: ShellWord[] = [];
  for (const w of inv.args) {
    const a = w.text;
    if (options && a === "--") options = false;
    else if (options && a === "--append") append = true;
    else if (options && /^-[A-Za-z]+$/.test(a)) append ||= a.includes("a");
    else if (!(options && a.startsWith("--"))) files.push(w);
  }
  for (const f of files) {
    fx.write(f);
    if (!append && !f.text.startsWith("/dev/"))
      fx.destructive(`${inv.name} ${f.text.slice(0, 80)} (empties the file first; -a appends)`);
  }
}

/** ln -f replaces its target with a link (`ln -sf /dev/null f` empties f for every reader). */
function ln(inv: Invocation, fx: Effects): void {
  fx.writer();
  let options = true;
  for (const w of inv.args) {
    if (options && w.text === "--") options = false;
    else if (options && (w.text === "--force" || /^-[A-Za-z]*f/.test(w.text))) {
      fx.destructive("ln -f (replaces the target)");
      return;
    }
  }
}

/** install copies like cp: from /dev/null (or an empty file) it empties the target. */
function install(inv: Invocation, fx: Effects): void {
  fx.writer();
  const source = inv.args.find((w) => EMPTY_SOURCES.has(w.text));
  if (source !== undefined) fx.destructive(`install ${source.text} (empties the target)`);
  if (inv.args.some((w) => /^(-d|--directory)$/.test(w.text))) return;
  const ops = operands(inv.args, ["-m", "--mode", "-o", "--owner", "-g", "--group", "-t", "-S"]);
  const target = ops[ops.length - 1];
  if (target !== undefined) for (const w of ops.slice(0, -1)) fx.copies([w], target);
}

/** Operands (not options) of `args`, `--` honoured; `valued` options take the next word. */
export function operands(args: readonly ShellWord[], valued: readonly string[] = []): ShellWord[] {
  const out: ShellWord[] = [];
  let options = true;
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as ShellWord;
    if (options && w.text === "--") options = false;
    else if (options && w.text.startsWith("-") && w.text.length > 1) {
      if (valued.includes(w.text)) i++;
    } else out.push(w);
  }
  return out;
}

/**
 * sed -i with a script that deletes lines, with -n (only what the script prints is kept), or
 * with a script file the line does not show. Called by the sed family with what it read.
 */
export function sedInPlaceEmpties(
  sed: { inPlace: boolean; quiet: boolean; scriptFile: boolean; scripts: readonly string[] },
  fx: Effects,
): void {
  if (!sed.inPlace) return;
  if (sed.quiet) fx.destructive("sed -i -n (keeps only the lines the script prints)");
  else if (sed.scriptFile) fx.destructive("sed -i -f (a script file may delete lines)");
  else if (sed.scripts.some(sedDeletes)) fx.destructive("sed -i with d (deletes lines in place)");
}

/** Options that take the next word as their value, per output-file program. */
const OUTPUT_VALUED: Record<string, readonly string[]> = {
  sort: ["-k", "--key", "-t", "--field-separator", "-S", "--buffer-size", "-T"].concat([
    "--temporary-directory",
    "--parallel",
    "--batch-size",
    "--files0-from",
    "--random-source",
    "--compress-program",
  ]),
  shuf: ["--random-source"],
  uniq: ["-f", "--skip-fields", "-s", "--skip-chars", "-w", "--check-chars"],
  iconv: ["-f", "--from-code", "-t", "--to-code"],
  xxd: ["-c", "-cols", "-g", "-groupsize", "-l", "-len", "-s", "-seek", "-o", "-n", "-name"],
};

/** Programs whose second operand is the output file (`uniq IN OUT`, `xxd -r IN OUT`). */
const OUTPUT_OPERAND = new Set(["uniq", "xxd"]);

/**
 * sort -o F, shuf -o F, iconv -o F, uniq IN OUT and xxd IN OUT write what they read into F: a copy group the
 * container judges (`sort -o f /dev/null`, `uniq /dev/null f` empty f). With no input file
 * and no piped input they read nothing; `shuf -n 0` writes nothing. Called by the sort
 * family (commandOptions) as well.
 */
export function outputFileEmpties(inv: Invocation, fx: Effects): void {
  fx.writer();
  const valued = OUTPUT_VALUED[inv.name] ?? [];
  const shuf = inv.name === "shuf";
  let out: ShellWord | undefined;
  let zero = false;
  let echo = false;
  let range = false;
  const ops: ShellWord[] = [];
  let options = true;
  for (let i = 0; i < inv.args.length; i++) {
    const w = inv.args[i] as ShellWord;
    const a = w.text;
    const next = inv.args[i + 1];
    if (options && a === "--") options = false;
    else if (options && valued.includes(a)) i++;
    else if (options && (/^-[A-Za-z]*o$/.test(a) || a === "--output")) {
      out = next;
      i++;
    } else if (options && a.startsWith("--output=")) out = { ...w, text: a.slice(9) };
    else if (options && /^-[A-Za-z]*o./.test(a) && !a.startsWith("--"))
      out = { ...w, text: a.slice(a.indexOf("o") + 1) };
    else if (shuf && options && (a === "-n" || a === "--head-count")) {
      zero ||= /^0+$/.test(next?.text ?? "");
      i++;
    } else if (shuf && options && (/^-n0+$/.test(a) || /^--head-count=0+$/.test(a))) zero = true;
    else if (shuf && options && (a === "-e" || a === "--echo")) echo = true;
    else if (shuf && options && (a === "-i" || a.startsWith("--input-range") || /^-i./.test(a))) {
      range = true;
      const spec =
        a === "-i" || a === "--input-range"
          ? (next?.text ?? "")
          : a.replace(/^(-i|--input-range=)/, "");
      // LO-HI with HI below LO is an empty range: nothing is written.
      const m = /^(\d+)-(\d+)$/.exec(spec);
      if (m !== null && Number(m[2]) < Number(m[1])) zero = true;
      if (a === "-i" || a === "--input-range") i++;
    } else if (options && a.startsWith("-") && a.length > 1) continue;
    else ops.push(w);
  }
  if (OUTPUT_OPERAND.has(inv.name) && out === undefined && ops.length >= 2) out = ops.pop();
  if (out === undefined || out.text.startsWith("/dev/")) return;
  fx.write(out);
  const shown = `${inv.name} … ${out.text.slice(0, 80)}`;
  const inputs = ops.length > 0 ? ops : inv.stdinFile === undefined ? [] : [inv.stdinFile];
  if (zero) fx.destructive(`${shown} (-n 0 writes nothing into it)`);
  else if (range || inv.stdin === "pipe") return;
  else if (echo) {
    if (ops.length === 0) fx.destructive(`${shown} (-e with no lines writes nothing into it)`);
  } else if (inputs.length > 0) fx.copies(inputs, out);
  else if (inv.stdin === undefined) fx.destructive(`${shown} (reads no input: empties it)`);
}

export const EMPTYING_FAMILIES: ReadonlyMap<string, Family> = new Map<string, Family>([
  ["uniq", outputFileEmpties],
  ["iconv", outputFileEmpties],
  ["xxd", outputFileEmpties],
  ["shuf", outputFileEmpties],
  ["tee", teeLike],
  ["sponge", teeLike],
  ["ln", ln],
  ["install", install],
]);
