/**
 * Which workspace paths a git patch may carry. `.git` itself is never part of a patch; git
 * refuses (in `git apply`'s verify_path) other names that some file system would read as
 * `.git`, so a patch holding one would not apply at all: such paths are left out, with the
 * reason. The check is the union of what git refuses on Linux, Windows (NTFS) and macOS
 * (HFS+), as a patch may be applied on any of them.
 */

/** Code points HFS+ ignores when it compares names (git's is_hfs_dotgit). */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/** True for a path inside (or being) a `.git` directory: never part of a patch. */
export function isGitMetadata(path: string): boolean {
  return path.split("/").includes(".git");
}

/** A name some file system would take for `.git` (or its NTFS short name), in any case. */
export function readsAsDotGit(name: string): boolean {
  const folded = name.replace(HFS_IGNORED, "").toLowerCase();
  // As git's is_ntfs_dotgit: `.git` then only dots and spaces up to the end or an NTFS
  // stream's `:` (`.git::$INDEX_ALLOCATION` is the directory .git on Windows).
  return /^\.git[. ]*(?::|$)/.test(folded) || /^git~\d+(?::|$)/.test(folded);
}

/**
 * Why `git apply` would refuse `path` somewhere (the reason to report), or undefined.
 * `symlink`: the entry is a symlink (git refuses a symlinked `.gitmodules`).
 */
export function gitRefusal(path: string, symlink: boolean): string | undefined {
  // Git for Windows refuses a path holding `\` (a separator there): the whole patch fails.
  if (path.includes("\\"))
    return "git on Windows refuses a name holding \\ (the patch would not apply there)";
  const parts = path.split("/");
  if (parts.some(readsAsDotGit)) return "git refuses this name (it reads as .git on some systems)";
  const last = (parts.at(-1) ?? "").replace(HFS_IGNORED, "").toLowerCase();
  if (symlink && (/^\.gitmodules[. ]*(?::|$)/.test(last) || /^gitmod~\d+(?::|$)/.test(last)))
    return "git refuses a symlink named .gitmodules";
  return undefined;
}
