/**
 * Programs whose input, not their command line, names the files they write: `patch`, an
 * extracting `tar`/`bsdtar`, `unzip`, `cpio -i`, `7z x` (and `git apply`, git-command.ts).
 * A patch or an archive the model wrote can replace a build file or put `.git/hooks/…` in
 * place with no path on the line, so such a command is dynamic (it asks where the policy
 * asks for what cannot be told). Listing, testing and dry runs are not.
 *
 * Must never: call an extraction or an applied patch ordinary because its line names no path.
 */
import type { Effects, Invocation } from "./command-effects.ts";

/** tar's extract mode: `x` in the first word's letters (`xzf`, `-xzf`), `-x`, `--extract`, `--get`. */
function tarExtracts(words: readonly string[]): boolean {
  const first = words[0] ?? "";
  if (/^-?[A-Za-z]*x/.test(first) && !first.startsWith("--")) return true;
  return words.some((w) => /^-[A-Za-z]*x[A-Za-z]*$/.test(w) || w === "--extract" || w === "--get");
}

/** Whether the invocation writes files its input names. */
function unpacks(inv: Invocation): boolean {
  const w = inv.args.map((a) => a.text);
  switch (inv.name) {
    case "patch":
      return !w.some((a) => a === "--dry-run" || a === "-C" || a === "--check");
    case "tar":
    case "bsdtar":
    case "gtar":
      return tarExtracts(w);
    case "unzip":
      return !w.some((a) => /^-[A-Za-z]*[lptvZ]/.test(a));
    case "cpio":
      return w.some((a) => /^-[A-Za-z]*i/.test(a) || a === "--extract");
    case "7z":
    case "7za":
      return w[0] === "x" || w[0] === "e";
    default:
      return false;
  }
}

/** Reports an unpacking invocation as dynamic (its input decides what it writes). */
export function unpacksInput(inv: Invocation, fx: Effects): void {
  if (!unpacks(inv)) return;
  fx.writer();
  fx.dynamic(`${inv.name} writes the files its input names (a patch or an archive)`);
}

export const UNPACKERS = ["patch", "tar", "bsdtar", "gtar", "unzip", "cpio", "7z", "7za"];
