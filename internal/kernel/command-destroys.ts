/**
 * Destructive forms of programs that are otherwise ordinary writers, for the analysis: `mv`
 * of workspace files out of the workspace, `cp /dev/null F` (empties F like truncate),
 * compressors that replace their input (`gzip F`), `tar --remove-files`, `zip -m`, and
 * `venv --clear` (behind `python -m`). Each reports `destructive` and `writer`; moving
 * within the workspace or overwriting a file stays ordinary (the change shows in the run's
 * diff). Pure; reports through `Effects`; never knows about other families.
 */
import type { Effects, Family, Invocation } from "./command-effects.ts";
import { EMPTY_SOURCES, operands } from "./command-empties.ts";
import { insideWorkspace } from "./inside-workspace.ts";
import type { ShellWord } from "./shell-syntax.ts";

/** The directory `-t DIR` / `--target-directory=DIR` names, if any. */
function targetDirectory(args: readonly ShellWord[]): ShellWord | undefined {
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as ShellWord;
    if (w.text === "-t" || w.text === "--target-directory") return args[i + 1];
    if (w.text.startsWith("--target-directory="))
      return { ...w, text: w.text.slice(19), pattern: w.pattern.slice(19) };
    // A bundle as getopt reads it: `-vt DIR`, `-at DIR`, `-vtDIR` (t takes the rest or the next word).
    const m = /^-[A-Za-z]*?t(.*)$/.exec(w.text);
    if (m !== null && !w.text.startsWith("--")) {
      const rest = m[1] as string;
      if (rest === "") return args[i + 1];
      const at = w.text.length - rest.length;
      return { ...w, text: rest, pattern: w.pattern.slice(at) };
    }
  }
  return undefined;
}

/** mv: moving files out of the workspace removes them from the run's work. */
function mv(inv: Invocation, fx: Effects): void {
  fx.writer();
  const named = targetDirectory(inv.args);
  const ops = operands(inv.args, ["-t", "--target-directory", "-S", "--suffix"]);
  const target = named ?? ops[ops.length - 1];
  const sources = named === undefined ? ops.slice(0, -1) : ops;
  if (sources.length > 0 && !insideWorkspace(target))
    fx.destructive("mv out of the workspace (removes the files from the run's work)");
  const empty = sources.find((w) => EMPTY_SOURCES.has(w.text));
  if (empty !== undefined) fx.destructive(`mv ${empty.text} (replaces the target)`);
  // -n / -i never overwrite (-i asks on a terminal the call does not have).
  const keeps = /^(-[A-Za-z]*[ni][A-Za-z]*|--no-clobber|--interactive|--update=none)$/;
  if (target === undefined || inv.args.some((w) => keeps.test(w.text))) return;
  for (const w of sources) fx.moves(w, target);
}

function cp(inv: Invocation, fx: Effects): void {
  fx.writer();
  const ops = operands(inv.args, ["-t", "--target-directory", "-S", "--suffix"]);
  const source = ops.find((w) => EMPTY_SOURCES.has(w.text));
  if (source !== undefined) fx.destructive(`cp ${source.text} (empties the target)`);
  const named = targetDirectory(inv.args);
  const target = named ?? ops[ops.length - 1];
  const sources = named === undefined ? ops.slice(0, -1) : ops;
  if (target === undefined) return;
  const tree = inv.args.some((w) =>
    /^(-[A-Za-z]*[rRa][A-Za-z]*|--recursive|--archive)$/.test(w.text),
  );
  for (const w of sources) if (!EMPTY_SOURCES.has(w.text)) fx.copies([w], target, { tree });
}

/**
 * Compressors that replace FILE with FILE.gz (and back) unless told to keep it or write to
 * stdout; zstd and lz4 keep their input unless given --rm.
 */
const KEEPS_INPUT = /^(-[A-Za-z0-9]*[cklt]|--(stdout|to-stdout|keep|list|test|help|version))/;
const REPLACING = "gzip gunzip bzip2 bunzip2 xz unxz lzma unlzma pigz unpigz compress uncompress";

function compressor(inv: Invocation, fx: Effects): void {
  fx.writer();
  const ops = operands(inv.args, ["-S", "--suffix", "-T", "--threads"]);
  if (ops.length === 0) return; // a filter: stdin to stdout
  const keepsByDefault = inv.name === "zstd" || inv.name === "unzstd" || inv.name === "lz4";
  const removes = keepsByDefault
    ? inv.args.some((w) => w.text === "--rm")
    : !inv.args.some((w) => KEEPS_INPUT.test(w.text));
  if (removes) fx.destructive(`${inv.name} (replaces its input file)`);
}

/** `python -m venv --clear DIR` empties DIR first. */
function venv(inv: Invocation, fx: Effects): void {
  fx.writer();
  if (inv.args.some((w) => w.text === "--clear")) fx.destructive("venv --clear");
}

/** tar --remove-files and zip -m delete what they archive; checked beside their command options. */
export function archiverDestroys(inv: Invocation, fx: Effects): void {
  const words = inv.args.map((w) => w.text);
  if (inv.name === "tar" && words.some((w) => w === "--remove-files"))
    fx.destructive("tar --remove-files");
  const archive = inv.name === "tar" ? createdArchive(inv.args) : undefined;
  if (archive !== undefined) fx.replaces("tar", archive);
  if (inv.name === "zip" && words.some((w) => w === "--move" || /^-[A-Za-z]*m/.test(w)))
    fx.destructive("zip -m (deletes what it archives)");
}

export const DESTROYING_FAMILIES: ReadonlyMap<string, Family> = new Map<string, Family>([
  ["mv", mv],
  ["cp", cp],
  ["venv", venv],
  ["virtualenv", venv],
  ...[...REPLACING.split(" "), "zstd", "unzstd", "lz4"].map((n): [string, Family] => [
    n,
    compressor,
  ]),
]);

/**
 * The archive `tar` creates (`-c`/`--create`, bundled `cf`/`-czf`, `-f F`, `-fF`, `--file=F`,
 * `--file F`): its bytes are output the line does not show. Undefined when tar does not
 * create, or writes to standard output (`-f -`).
 */
function createdArchive(args: readonly ShellWord[]): ShellWord | undefined {
  const first = args[0]?.text ?? "";
  const bundled = /^[A-Za-z]+$/.test(first); // old style: `tar cf F …`
  const creates =
    (bundled && first.includes("c")) ||
    args.some((w) => /^--cr(e(a(te?)?)?)?$/.test(w.text) || /^-[A-Za-z]*c[A-Za-z]*$/.test(w.text));
  if (!creates) return undefined;
  let file: ShellWord | undefined;
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as ShellWord;
    const t = w.text;
    // GNU tar takes any unambiguous prefix of a long option (`--fil=F`, `--fi F`).
    const long = /^--fi(le?)?(=|$)/.exec(t);
    if (long !== null && long[2] === "") file = args[i + 1];
    else if (long !== null) {
      const at = long[0].length;
      file = { ...w, text: t.slice(at), pattern: w.pattern.slice(at) };
    } else if (/^-[A-Za-z]*f$/.test(t) && t !== "-f-") file = args[i + 1];
    else if (/^-[A-Za-z]*f./.test(t)) {
      const at = t.indexOf("f") + 1;
      file = { ...w, text: t.slice(at), pattern: w.pattern.slice(at) };
    }
  }
  if (file === undefined && bundled && first.includes("f")) file = args[1];
  return file === undefined || file.text === "-" ? undefined : file;
}
