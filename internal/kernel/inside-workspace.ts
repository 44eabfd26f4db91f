/**
 * Whether a path argument, as written, stays inside the workspace: relative without
 * climbing above where it starts, or under /workspace. Conservative by construction — a
 * computed word (variable, glob, brace, `~`) is not known to be inside. Pure.
 */
import type { ShellWord } from "./shell-syntax.ts";

const ROOT = "/workspace";

export function insideWorkspace(w: ShellWord | undefined): boolean {
  if (w === undefined || w.expansions.length > 0 || w.glob || w.tilde || w.brace) return false;
  const underRoot = w.text === ROOT || w.text.startsWith(`${ROOT}/`);
  if (w.text.startsWith("/") && !underRoot) return false;
  const path = underRoot ? w.text.slice(ROOT.length) : w.text;
  let depth = 0;
  for (const seg of path.split("/")) {
    if (seg === "..") depth--;
    else if (seg !== "" && seg !== ".") depth++;
    if (depth < 0) return false;
  }
  return true;
}
