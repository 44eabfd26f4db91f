/**
 * The `.gitignore` rules of a workspace, with git's semantics: each file's patterns are
 * relative to its directory, deeper files win over shallower ones, negation, directory-only
 * patterns, `**`, and nothing inside an ignored directory can be re-included. Matching is
 * the `ignore` package's; this module only rewrites each nested file's patterns to be
 * relative to the root so one matcher sees them all in git's order of precedence.
 *
 * Must never decide about tracked files: git ignores only untracked paths (the caller asks
 * only about paths the base does not hold).
 */
import ignore, { type Ignore } from "ignore";

/** Characters special in a gitignore pattern, escaped when a directory name is a prefix. */
const GLOB_SPECIAL = /[\\*?[\]]/g;

/** `dir` as a literal pattern prefix (a leading `#` or `!` would start a comment or a negation). */
function literalDir(dir: string): string {
  return dir.replace(GLOB_SPECIAL, "\\$&").replace(/^[#!]/, "\\$&");
}

/**
 * One line of `<dir>/.gitignore` rewritten relative to the root, or undefined for a comment
 * or a blank line. A pattern with a slash before its end is anchored to `dir`; one without
 * matches at any depth below it.
 */
export function rootRelativePattern(dir: string, line: string): string | undefined {
  if (line.startsWith("#")) return undefined;
  const negated = line.startsWith("!");
  const body = negated ? line.slice(1) : line;
  // Trailing spaces and a CR do not count (the matcher trims them the same way).
  const core = body.replace(/\r$/, "").replace(/ +$/, "");
  if (core === "" || core === "/") return undefined;
  const anchored = core.replace(/\/$/, "").includes("/");
  const prefix = literalDir(dir);
  const rewritten = anchored ? `${prefix}/${body.replace(/^\//, "")}` : `${prefix}/**/${body}`;
  return negated ? `!${rewritten}` : rewritten;
}

export interface GitignoreRules {
  /** True when git would ignore the untracked `path` (a file or a symlink). */
  ignores(path: string): boolean;
}

/**
 * The rules of the `.gitignore` files of a workspace, keyed by their directory ("" for the
 * root), as one matcher.
 */
export function createGitignoreRules(files: ReadonlyMap<string, string>): GitignoreRules {
  // Precedence: a deeper file's rules come later, and the last matching rule wins.
  const dirs = [...files.keys()].sort(
    (a, b) => depth(a) - depth(b) || (a < b ? -1 : a > b ? 1 : 0),
  );
  // git on Linux matches case-sensitively (core.ignorecase false).
  const ig: Ignore = ignore({ ignorecase: false });
  for (const dir of dirs) {
    const text = files.get(dir) ?? "";
    if (dir === "") {
      ig.add(text);
      continue;
    }
    const patterns: string[] = [];
    for (const line of text.split("\n")) {
      const p = rootRelativePattern(dir, line);
      if (p !== undefined) patterns.push(p);
    }
    ig.add(patterns);
  }
  return {
    ignores(path) {
      try {
        return ig.ignores(path);
      } catch {
        // A name the matcher will not take (e.g. "..."): not ignored, so it stays visible.
        return false;
      }
    },
  };
}

function depth(dir: string): number {
  return dir === "" ? 0 : dir.split("/").length;
}
