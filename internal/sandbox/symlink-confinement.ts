/**
 * Keeps a patch's symlinks inside the tree it is applied to. A link is resolved the way the
 * kernel would resolve it in the tree after the patch (component by component, following
 * every symlink on the way, `..` popping a level), so a chain of links that are each
 * harmless on their own (`y -> .` then `x -> y/..`) is caught too. The symlinks the patch
 * creates or changes that make any link of that tree lead out (absolute, above the root, or
 * a chain longer than the kernel follows) are left out of the patch, and so are those that
 * lead into `.git` in any spelling a file system would read as it (`.GIT`, `./.git`,
 * `a/../.Git/hooks`): a link into the repository's metadata is how a later `git` command
 * would be made to write hooks or config.
 *
 * Must never look at a file system: the tree is the maps it is given.
 */

import { readsAsDotGit } from "./git-path-rules.ts";

/** Symlinks the kernel follows in one lookup before it answers ELOOP (Linux). */
const MAX_HOPS = 40;

export interface LinkResolution {
  inside: boolean;
  /** Why it leads out. */
  reason?: string;
  /** The symlinks followed, in order (the link itself first). */
  via: string[];
}

/** Resolves `path` in the tree whose symlinks are `linkOf`, without a file system. */
export function resolveLink(
  path: string,
  linkOf: (p: string) => string | undefined,
): LinkResolution {
  const stack: string[] = [];
  const queue = path.split("/").reverse();
  const via: string[] = [];
  while (queue.length > 0) {
    const c = queue.pop() as string;
    if (c === "" || c === ".") continue;
    if (c === "..") {
      if (stack.length === 0) return { inside: false, reason: "leads out of the workspace", via };
      stack.pop();
      continue;
    }
    stack.push(c);
    if (readsAsDotGit(c)) return { inside: false, reason: "points into .git", via };
    const here = stack.join("/");
    const target = linkOf(here);
    if (target === undefined) continue;
    via.push(here);
    if (via.length > MAX_HOPS)
      return { inside: false, reason: "is a symlink loop or a chain too long", via };
    // Read as Windows reads it too (Git for Windows keeps `\` in a link's target): a drive
    // or a `\` start is absolute, `\` separates names.
    if (/^([/\\]|[A-Za-z]:)/.test(target))
      return { inside: false, reason: "points to an absolute path", via };
    stack.pop();
    for (const part of target.split(/[/\\]/).reverse()) queue.push(part);
  }
  return { inside: true, via };
}

/**
 * The changed symlinks to leave out of a patch, with the reason. `links` is every symlink of
 * the tree after the patch (path to target) and is updated as links are left out: a left-out
 * link gets its base target back (`baseLinks`) or goes. `changed` holds the symlinks the
 * patch creates or changes.
 */
export function confineSymlinks(
  links: Map<string, string>,
  changed: ReadonlySet<string>,
  baseLinks: ReadonlyMap<string, string>,
): Map<string, string> {
  const omitted = new Map<string, string>();
  // Leaving a link out changes the tree: go again until a round leaves nothing out. Each
  // round leaves at least one more changed link out, so this ends.
  for (let again = true; again; ) {
    again = false;
    for (const path of [...links.keys()]) {
      const r = resolveLink(path, (p) => links.get(p));
      if (r.inside) continue;
      // A changed link that leads out goes itself; an unchanged one leads out through the
      // changed links it follows (the base alone never leads out: it was checked on upload).
      const culprits = changed.has(path) ? [path] : r.via;
      for (const culprit of culprits) {
        if (!changed.has(culprit) || omitted.has(culprit)) continue;
        omitted.set(
          culprit,
          culprit === path
            ? `a symlink that ${r.reason}`
            : "a symlink through which another symlink leads out of the workspace",
        );
        const base = baseLinks.get(culprit);
        if (base === undefined) links.delete(culprit);
        else links.set(culprit, base);
        again = true;
      }
    }
  }
  return omitted;
}
