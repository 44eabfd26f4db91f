/**
 * Every command line in the sh blocks of README.md and docs/*.md runs as written from a
 * fresh clone after `make build`: agentd and agentctl lines are run with --help appended
 * (their argument parsing is strict, so an unknown command or flag fails before the help
 * is printed), the other programs must exist where the line says (node_modules/.bin/buf),
 * make targets must be in the Makefile. Placeholders in the docs (RUN, ID, FILE, …) are
 * arguments, which --help does not look at.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "..");
const FILES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The command lines of a markdown file's sh/bash blocks, split at ; && and |. */
function commandsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const out: string[] = [];
  for (const block of text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```/gm)) {
    for (let line of (block[1] as string).split("\n")) {
      line = line.replace(/\s+#.*$/, "").trim();
      if (line === "" || line.startsWith("#")) continue;
      for (const part of line.split(/\s*(?:;|&&|\|\|?)\s*/)) {
        const cmd = part.replace(/^(?:[A-Z_]+=\S*\s+)+/, "").trim();
        if (cmd !== "") out.push(cmd);
      }
    }
  }
  return out;
}

/** Shell-like words (quotes kept together, quote characters removed). */
function words(cmd: string): string[] {
  return [...cmd.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map(
    (m) => m[1] ?? m[2] ?? (m[3] as string),
  );
}

describe("the commands in README.md and docs/ work as written", () => {
  const makefile = readFileSync(join(ROOT, "Makefile"), "utf8");
  for (const file of FILES) {
    const commands = commandsOf(file);
    if (commands.length === 0) continue;
    it(`${file}: ${commands.length} command(s)`, () => {
      for (const cmd of commands) {
        const [prog, ...args] = words(cmd);
        if (prog === "bin/agentd" || prog === "bin/agentctl") {
          const r = spawnSync(join(ROOT, prog), [...args, "--help"], {
            cwd: ROOT,
            encoding: "utf8",
            timeout: 120_000, // a safety net for a hung command
          });
          assert.equal(r.status, 0, `${file}: ${cmd}\n${r.stderr}`);
        } else if (prog === "make") {
          for (const t of args.filter((a) => !a.includes("=")))
            assert.match(
              makefile,
              new RegExp(`^${t}:`, "m"),
              `${file}: ${cmd}: no make target ${t}`,
            );
        } else if (prog?.includes("/")) {
          assert.ok(
            existsSync(join(ROOT, prog)),
            `${file}: ${cmd}: ${prog} does not exist after make build`,
          );
        }
      }
    });
  }
});
