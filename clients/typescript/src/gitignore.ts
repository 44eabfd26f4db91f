/**
 * .gitignore matching for directories that are not git work trees (inside one, the packer
 * asks git itself). Follows gitignore(5): blank lines and `#` comments skipped, trailing
 * unescaped spaces dropped, `!` re-includes, a trailing `/` matches directories only, a
 * pattern with a `/` anywhere but at its end is anchored to its .gitignore's directory,
 * otherwise it matches a name at any depth; `*`, `?`, `[...]` and `**` as in git. Within one
 * directory the last matching pattern wins; deeper .gitignore files come later. As in git,
 * nothing below an ignored directory can be re-included (the walker does not enter it).
 */
import picomatch from "picomatch";

interface Rule {
  /** Directory of the .gitignore, relative to the root ("" for the root). */
  base: string;
  negate: boolean;
  dirOnly: boolean;
  match: (relToBase: string) => boolean;
}

/** Parses the text of one .gitignore found in `base` (relative to the root, "" for it). */
export function parseGitignore(text: string, base: string): Rule[] {
  const rules: Rule[] = [];
  for (let line of text.split(/\r?\n/)) {
    if (line === "" || line.startsWith("#")) continue;
    // Trailing spaces are dropped unless escaped with a backslash.
    line = line.replace(/(?<!\\)\s+$/, "");
    if (line.endsWith("\\ ")) line = `${line.slice(0, -2)} `;
    if (line === "") continue;
    let negate = false;
    if (line.startsWith("!")) {
      negate = true;
      line = line.slice(1);
    } else if (line.startsWith("\\!") || line.startsWith("\\#")) {
      line = line.slice(1);
    }
    let dirOnly = false;
    if (line.endsWith("/")) {
      dirOnly = true;
      line = line.replace(/\/+$/, "");
    }
    if (line === "") continue;
    const anchored = line.includes("/");
    if (line.startsWith("/")) line = line.replace(/^\/+/, "");
    const glob = anchored ? line : `**/${line}`;
    const m = picomatch(glob, { dot: true, nonegate: true, noext: true, nobrace: true });
    rules.push({ base, negate, dirOnly, match: (p) => m(p) });
  }
  return rules;
}

/**
 * The rules in effect in one directory: its parent's plus those of its own .gitignore.
 * Immutable; `child` makes the next level.
 */
export class IgnoreStack {
  readonly #rules: readonly Rule[];

  constructor(rules: readonly Rule[] = []) {
    this.#rules = rules;
  }

  /** The stack for a subdirectory `base` whose .gitignore text is `text` (if any). */
  child(base: string, text: string | undefined): IgnoreStack {
    if (text === undefined || text === "") return this;
    return new IgnoreStack([...this.#rules, ...parseGitignore(text, base)]);
  }

  /** Whether `relPath` (relative to the root, "/"-separated) is ignored. */
  ignores(relPath: string, isDir: boolean): boolean {
    let ignored = false;
    for (const r of this.#rules) {
      if (r.dirOnly && !isDir) continue;
      let rel: string;
      if (r.base === "") rel = relPath;
      else if (relPath.startsWith(`${r.base}/`)) rel = relPath.slice(r.base.length + 1);
      else continue;
      if (r.match(rel)) ignored = !r.negate;
    }
    return ignored;
  }
}
