/**
 * agentd's version: package.json's `version`, read once. Printed by `agentd --version` and
 * `agentctl --version`. Must never: fail a command because the file cannot be read (it
 * answers "unknown" then).
 */
import { readFileSync } from "node:fs";

let cached: string | undefined;

export function agentdVersion(): string {
  if (cached !== undefined) return cached;
  try {
    const pkg = JSON.parse(
      readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
    ) as { version?: unknown };
    cached = typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    cached = "unknown";
  }
  return cached;
}

/** The line `--version` prints: `NAME VERSION (node vX, linux-x64)`. */
export function versionLine(name: string): string {
  return `${name} ${agentdVersion()} (node ${process.version}, ${process.platform}-${process.arch})\n`;
}
