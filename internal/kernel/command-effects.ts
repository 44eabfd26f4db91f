/**
 * The contract between the command analysis and the program families: how a family sees one
 * command (`Invocation`) and what it may report about it (`Effects`). Types and one word
 * helper only; never any knowledge of a program.
 */
import type { ShellCommand, ShellWord } from "./shell-syntax.ts";

/** One command as the family sees it: its name (no directory) and its argument words. */
export interface Invocation {
  name: string;
  args: readonly ShellWord[];
  /** Where its standard input comes from when not inherited. */
  stdin: ShellCommand["stdin"];
  /** The file redirected into standard input (`sh < s.sh`). */
  stdinFile?: ShellWord;
}

/** What a family reports about a command. */
export interface Effects {
  /** The analysis cannot tell what runs (a reason such as "python -c"). */
  dynamic(reason: string): void;
  /** A destructive form (reason such as "find -delete"). */
  destructive(reason: string): void;
  /** A file (as written, relative to the command's directory) whose content decides what runs. */
  script(path: ShellWord): void;
  /** Files in a directory (the command's own when undefined) that decide what a tool runs. */
  scriptFiles(dir: ShellWord | undefined, files: readonly string[]): void;
  /** Shell code in an argument (sh -c CODE, eval, trap, watch): analysed as a command line. */
  code(text: string): void;
  /** A command the program runs (find -exec, xargs, a wrapper's command). */
  run(words: readonly ShellWord[], stdin?: ShellCommand["stdin"]): void;
  /** The program may write files. */
  writer(): void;
  /** A file the program writes (find -fprint F). */
  write(target: ShellWord): void;
  /** A file-name pattern the program matches itself (find -name P): `*` matches a leading dot. */
  pattern(word: ShellWord): void;
  /** The program reads configuration that can run commands from its directory (git). */
  configFromDirectory(): void;
  /** The shell's directory changes (cd DIR; undefined: to somewhere the line does not show). */
  cd(target: ShellWord | undefined): void;
  /**
   * Files copied onto `target` (a file, or a directory), which is emptied when every one of
   * them is empty; `tree`: a recursive copy (a directory source's files land in the target).
   */
  copies(sources: readonly ShellWord[], target: ShellWord, opts?: { tree?: boolean }): void;
  /** `program` fills `target` with output the line does not show (`tar -cf T …`). */
  replaces(program: string, target: ShellWord): void;
  /** `mv SOURCE TARGET`: an existing TARGET (or TARGET/SOURCE's name, for a directory) is replaced. */
  moves(source: ShellWord, target: ShellWord): void;
}

export type Family = (inv: Invocation, fx: Effects) => void;

/** Words holding a placeholder the program fills in (find's {}, xargs -I R) are computed. */
export function withPlaceholder(
  words: readonly ShellWord[],
  token: string,
  why: string,
): ShellWord[] {
  return words.map((w) =>
    w.text.includes(token) ? { ...w, expansions: [...w.expansions, why] } : w,
  );
}
