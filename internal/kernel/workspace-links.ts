/**
 * Whether the workspace holds a symbolic link whose target leaves it, even for one hop
 * (`L → /tmp/d/x`, whatever /tmp/d/x then leads to), or one the check cannot read: through
 * such a link repo.read, repo.search (ripgrep reads a linked `.ignore`) and repo.patch reach
 * or probe files outside /workspace — what they hold, where they lead, which workspace file
 * a link out there points back at. So while the run holds a secret outside the workspace,
 * a repo.* call can read it as an exec can (secret-containment.ts).
 * One exec in the sandbox lists every link with its target (NUL-separated); each target is
 * resolved lexically against its link's directory here. A link inside whose own path passes
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

/** Whether a listing of `path\0target\0` pairs names a target outside /workspace. */
export function anyLinkLeaves(listing: string): boolean {
  const parts = listing.split("\0");
  if (parts.pop() !== "" || parts.length % 2 !== 0) return true;
  for (let i = 0; i < parts.length; i += 2) {
    const link = parts[i] as string;
    const target = parts[i + 1] as string;
    const to = posix.resolve(posix.dirname(link), target);
    if (to !== "/workspace" && !to.startsWith("/workspace/")) return true;
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
