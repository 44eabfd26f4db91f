/** repo.search: ripgrep over the workspace (its JSON output), capped, deny patterns excluded. */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { runScript } from "./sandbox-script.ts";
import { defineTool } from "./tool.ts";

interface Match {
  path: string;
  line: number;
  text: string;
}

export const repoSearch = defineTool({
  name: "repo.search",
  category: "read",
  description:
    "Search the workspace with a regular expression (ripgrep syntax). Optionally restrict to file globs (e.g. '*.ts', 'src/**'). Returns matching lines with paths and line numbers, capped.",
  input: z
    .object({
      query: z.string().min(1).max(1000).describe("Regular expression (ripgrep/Rust syntax)"),
      globs: z
        .array(
          z
            .string()
            .min(1)
            .max(200)
            .refine((g) => !g.includes("\0"), "no NUL bytes"),
        )
        .max(20)
        .optional()
        .describe("Only files matching these globs; prefix with ! to exclude"),
      caseSensitive: z
        .boolean()
        .optional()
        .describe("Default: smart case (case-insensitive unless the query has capitals)"),
    })
    .strict(),
  async execute(ctx, input) {
    const max = ctx.limits.maxSearchMatches;
    const argv = [
      "rg",
      "--json",
      "--hidden",
      "--max-filesize",
      "2M",
      "--max-count",
      String(max),
      "--max-columns",
      "500",
      // Results in path order, never the directories' listing order: a program can choose
      // that order (rename a directory away and back) and it must not reach the model.
      "--sort",
      "path",
      // Ignore rules only from the workspace's own ignore files: not a repository's
      // info/exclude (a `.git` file's gitdir can name any directory, /tmp too) nor a global
      // excludes file (HOME's git config), nor ignore files of the workspace's parents, nor
      // a config file an environment names — what lies outside must not steer a search.
      "--no-ignore-exclude",
      "--no-ignore-global",
      "--no-ignore-parent",
      "--no-config",
    ];
    argv.push(
      input.caseSensitive === undefined
        ? "--smart-case"
        : input.caseSensitive
          ? "--case-sensitive"
          : "--ignore-case",
    );
    for (const g of input.globs ?? []) argv.push("-g", g);
    // Denied paths are never searched: excluded before ripgrep opens anything.
    for (const d of ctx.denyPatterns) argv.push("-g", `!${d}`);
    argv.push("-e", input.query, "--", ".");
    const r = await runScript(ctx, '"$@"', argv, {
      maxOutputBytes: 4 * 1024 * 1024,
      timeoutMs: 60_000,
    });
    if (r.exitCode === 2 && r.stdout === "") {
      throw new AgentdError(
        "EVALIDATION",
        `query: ${r.stderr.trim().split("\n").slice(-3).join(" ") || "ripgrep failed"}`,
        { field: "query" },
      );
    }
    if (r.exitCode === 127)
      throw new AgentdError("EIO", "repo.search needs ripgrep (rg) in the sandbox image");
    const matches: Match[] = [];
    let total = 0;
    for (const line of r.stdout.split("\n")) {
      if (!line.startsWith('{"type":"match"')) continue;
      total++;
      if (matches.length >= max) continue;
      try {
        const m = JSON.parse(line) as {
          data: { path: { text?: string }; line_number: number; lines: { text?: string } };
        };
        matches.push({
          path: (m.data.path.text ?? "").replace(/^\.\//, ""),
          line: m.data.line_number,
          text: (m.data.lines.text ?? "").replace(/\n$/, ""),
        });
      } catch {
        // a line cut by the output cap
      }
    }
    return { matches, truncated: total > matches.length || r.truncated };
  },
});
