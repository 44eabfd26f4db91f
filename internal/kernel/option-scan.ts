/**
 * Reads a program's leading options by a spec (which options are flags, which take a value,
 * which mean "inline code"), so the analysis knows where the operands start: the command a
 * wrapper runs, the script an interpreter runs. An option the spec does not know is reported,
 * because whether it takes a value decides which word is the command. Pure.
 */
import type { ShellWord } from "./shell-syntax.ts";

export interface OptionSpec {
  /** Options without a value, e.g. "-i", "--verbose". Single letters also combine ("-ab"). */
  flags?: readonly string[];
  /** Options with a value, separate ("-n 5") or attached ("-n5", "--n=5"). */
  values?: readonly string[];
  /** Options whose value is code (`-c CODE`, `--eval CODE`): reported as `code`. */
  code?: readonly string[];
  /** Single letters that, anywhere in a cluster, make the next operand inline code (perl -ne). */
  codeLetters?: string;
  /** Options that end option parsing and make the next word a module or file (python -m). */
  module?: readonly string[];
  /** Accept any option starting with one of these prefixes as a flag ("--allow-"). */
  flagPrefixes?: readonly string[];
  /** Words "+o" style are options too (sh +e). */
  plusOptions?: boolean;
}

export interface OptionScan {
  /** Index of the first operand (args.length when none). */
  operand: number;
  /** Inline code given through an option or a code letter (the code word, when present). */
  code?: { option: string; word?: ShellWord };
  /** A module option and its value (python -m MOD). */
  module?: { option: string; word?: ShellWord };
  /** Options the spec does not know (their values may have been taken for operands). */
  unknown: string[];
  /** Values of options, for path checks and for options the caller inspects. */
  values: { option: string; word?: ShellWord }[];
}

/** Scans options from args[from]; stops at "--", "-" or the first operand. */
export function scanOptions(args: readonly ShellWord[], spec: OptionSpec, from = 0): OptionScan {
  const out: OptionScan = { operand: args.length, unknown: [], values: [] };
  const flags = new Set(spec.flags ?? []);
  const values = new Set(spec.values ?? []);
  const code = new Set(spec.code ?? []);
  const modules = new Set(spec.module ?? []);
  for (let i = from; i < args.length; i++) {
    const a = (args[i] as ShellWord).text;
    if (a === "--") {
      out.operand = i + 1;
      return out;
    }
    const isOption =
      (a.startsWith("-") || (spec.plusOptions === true && a.startsWith("+"))) && a.length > 1;
    if (!isOption) {
      out.operand = i;
      return out;
    }
    const eq = a.indexOf("=");
    const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
    const attached = name !== a;
    if (code.has(name) || modules.has(name)) {
      const word = attached ? undefined : args[i + 1];
      const hit = { option: name, ...(word === undefined ? {} : { word }) };
      if (code.has(name)) out.code = hit;
      else out.module = hit;
      out.operand = attached ? i + 1 : i + 2;
      return out;
    }
    // A code letter anywhere in a short cluster (perl -lane, sh -ec) means inline code.
    const letters = spec.codeLetters ?? "";
    if (!a.startsWith("--") && [...a.slice(1)].some((l) => letters.includes(l))) {
      const word = args[i + 1];
      out.code = { option: a, ...(word === undefined ? {} : { word }) };
      out.operand = i + 2;
      return out;
    }
    if (flags.has(name)) continue;
    // A known value option wins over a flag prefix ("--test-reporter" under "--test-").
    if (values.has(name)) {
      const word = attached ? attachedWord(args[i] as ShellWord, eq + 1) : args[i + 1];
      out.values.push({ option: name, ...(word === undefined ? {} : { word }) });
      if (!attached) i++;
      continue;
    }
    if (spec.flagPrefixes?.some((p) => name.startsWith(p))) continue;
    if (!a.startsWith("--")) {
      const r = cluster(a, flags, values, code, modules, spec.codeLetters ?? "");
      if (r?.kind === "flags") continue;
      if (r?.kind === "value") {
        // "-n5", "-iS'rm x'": the value is the rest of the word, after the option's letter.
        const word = attachedWord(args[i] as ShellWord, r.at + 1);
        out.values.push({ option: r.option, word });
        continue;
      }
      if (r?.kind === "next-value") {
        const word = args[i + 1];
        out.values.push({ option: r.option, ...(word === undefined ? {} : { word }) });
        i++;
        continue;
      }
      if (r?.kind === "code" || r?.kind === "module") {
        const word = args[i + 1];
        const hit = { option: a, ...(word === undefined ? {} : { word }) };
        if (r.kind === "code") out.code = hit;
        else out.module = hit;
        out.operand = i + 2;
        return out;
      }
    }
    out.unknown.push(a);
  }
  return out;
}

/** The value attached to an option (`--opt=VALUE`, `-nVALUE`): the word from `offset` on. */
function attachedWord(arg: ShellWord, offset: number): ShellWord {
  // Option names hold no glob characters, so text and pattern share the prefix's length.
  const pattern = arg.pattern.slice(offset);
  return { ...arg, text: arg.text.slice(offset), pattern, tilde: pattern.startsWith("~") };
}

type Cluster =
  | { kind: "flags" | "code" | "module" }
  | { kind: "value" | "next-value"; option: string; at: number };

/**
 * A short-option cluster: all flags ("-xv"), a value option with its value attached ("-n5",
 * "-iS'rm x'"), flags ending in a value option ("-xn" then the value), or a code letter
 * (perl -ne). `option` is the value option itself and `at` its index in the word.
 */
function cluster(
  a: string,
  flags: Set<string>,
  values: Set<string>,
  code: Set<string>,
  modules: Set<string>,
  codeLetters: string,
): Cluster | undefined {
  const letters = a.slice(1);
  for (let k = 0; k < letters.length; k++) {
    const opt = `-${letters[k]}`;
    if (codeLetters.includes(letters[k] as string) || code.has(opt)) return { kind: "code" };
    if (modules.has(opt)) return { kind: "module" };
    if (values.has(opt))
      return { kind: k === letters.length - 1 ? "next-value" : "value", option: opt, at: k + 1 };
    if (!flags.has(opt)) return undefined;
  }
  return { kind: "flags" };
}
