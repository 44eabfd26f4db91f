/**
 * Whether the workspace holds a symbolic link whose target leaves it, even for one hop
 * (`L → /tmp/d/x`, whatever /tmp/d/x then leads to), or one the check cannot read: through
 * such a link repo.read, repo.search (ripgrep reads a linked `.ignore`) and repo.patch reach
 * or probe files outside /workspace — what they hold, where they lead, which workspace file
 * a link out there points back at. So while the run holds a secret outside the workspace,
 * a repo.* call can read it as an exec can (secret-containment.ts).
 * One exec in the sandbox lists every link with its target (NUL-separated); each target is
 * resolved here as the kernel resolves it, one component at a time: a component that is
 * itself a listed link is replaced by where that link leads before a later `..` climbs
 * (`s → .` then `s/../tmp/x` is /tmp/x, not /workspace/tmp/x). Any step outside /workspace,
 * even one that comes back, counts as leading out. A link inside whose own path passes
 * through a link out is caught at that link.
 *
 * Must never: answer false when unsure (find or the exec failed, the list was cut, a name
 * it cannot pair): unsure is "leads outside".
 */
import { posix } from "node:path";
import type { SandboxHandle } from "../sandbox/port.ts";

/** Every link under /workspace as `path\0target\0`; exit 0 only when all were listed. */
export const LINKS_SCRIPT = `find /workspace -type l -exec sh -c '
for l; do t=$(readlink "$l") || exit 3; printf "%s\\0%s\\0" "$l" "$t"; done' agentd-links {} +`;

const MAX_LIST_BYTES = 16 * 1024 * 1024;

/** The kernel's own limit on links followed in one lookup (Linux MAXSYMLINKS). */
const MAX_HOPS = 40;

const inside = (p: string): boolean => p === "/workspace" || p.startsWith("/workspace/");

/**
 * Where `target`, read from a link in directory `dir`, leads as the kernel walks it, with
 * every listed link on the way expanded; undefined when any step leaves /workspace or the
 * walk follows more than MAX_HOPS links (the kernel's ELOOP: unsure, so out).
 */
function walk(dir: string, target: string, links: Map<string, string>, hops: { n: number }) {
  let at = target.startsWith("/") ? "/" : dir;
  for (const part of target.split("/")) {
    if (part === "" || part === ".") continue;
    at = part === ".." ? posix.dirname(at) : posix.join(at, part);
    if (!inside(at)) return undefined;
    const next = links.get(at);
    if (next === undefined) continue;
    if (++hops.n > MAX_HOPS) return undefined;
    const to = walk(posix.dirname(at), next, links, hops);
    if (to === undefined) return undefined;
    at = to;
  }
  return inside(at) ? at : undefined;
}

/** Whether a listing of `path\0target\0` pairs names a link that leads outside /workspace. */
export function anyLinkLeaves(listing: string): boolean {
  const parts = listing.split("\0");
  if (parts.pop() !== "" || parts.length % 2 !== 0) return true;
  const links = new Map<string, string>();
  for (let i = 0; i < parts.length; i += 2) {
    const link = parts[i] as string;
    if (!inside(link) || posix.normalize(link) !== link) return true;
    links.set(link, parts[i + 1] as string);
  }
  for (const [link, target] of links) {
    if (walk(posix.dirname(link), target, links, { n: 0 }) === undefined) return true;
  }
  return false;
}

export async function linksLeaveWorkspace(
  sandbox: SandboxHandle,
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    const r = await sandbox.exec({
      argv: ["sh", "-c", LINKS_SCRIPT],
      cwd: "/",
      timeoutMs: 60_000,
      maxOutputBytes: MAX_LIST_BYTES,
      ...(sandbox.toolEnv === undefined ? {} : { env: { ...sandbox.toolEnv } }),
      ...(signal === undefined ? {} : { signal }),
    });
    if (r.exitCode !== 0 || r.timedOut || r.cancelled || r.truncated) return true;
    return anyLinkLeaves(r.stdout);
  } catch {
    return true;
  }
}
