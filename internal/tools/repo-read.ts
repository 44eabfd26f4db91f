/** repo.read: a file of the workspace, whole or a range of lines, capped. */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { checkPath, RESOLVE_SH } from "./jail.ts";
import { resolvedAnswer, runScript } from "./sandbox-script.ts";
import { defineTool } from "./tool.ts";

const READ_SH = `${RESOLVE_SH}
[ -e "$p" ] || exit 5
[ -f "$p" ] || exit 4
if [ -n "$2" ]; then sed -n "$2,$3p" "$p" | head -c "$4"; else head -c "$4" "$p"; fi`;

export const repoRead = defineTool({
  name: "repo.read",
  category: "read",
  description:
    "Read a file of the workspace (path relative to the workspace root). Optionally only lines start..end (1-based, inclusive). Large files are cut at a size limit: read them by ranges.",
  input: z
    .object({
      path: z
        .string()
        .min(1)
        .describe("File path relative to the workspace root, e.g. src/index.ts"),
      range: z
        .object({
          start: z.number().int().min(1).describe("First line, 1-based"),
          end: z.number().int().min(1).describe("Last line, inclusive"),
        })
        .refine((r) => r.end >= r.start, { message: "end must be >= start", path: ["end"] })
        .optional()
        .describe("Only these lines"),
    })
    .strict(),
  async execute(ctx, input) {
    const rel = checkPath("path", input.path, ctx.denyPatterns);
    const cap = ctx.limits.maxFileReadBytes;
    const args = [
      rel,
      String(input.range?.start ?? ""),
      String(input.range?.end ?? ""),
      String(cap + 1),
    ];
    const r = await runScript(ctx, READ_SH, args, { maxOutputBytes: cap + 8192 });
    if (r.exitCode === 2)
      throw new AgentdError(
        "ENOTFOUND",
        `path ${JSON.stringify(input.path)}: a link on the way does not resolve`,
      );
    const { rel: real, rest } = resolvedAnswer(ctx, "path", input.path, r.stdout);
    if (r.exitCode === 5)
      throw new AgentdError("ENOTFOUND", `path ${JSON.stringify(input.path)}: no such file`);
    if (r.exitCode === 4) {
      throw new AgentdError(
        "EPERMISSION",
        `path ${JSON.stringify(input.path)}: not a regular file (a directory or a device)`,
        { field: "path" },
      );
    }
    if (r.exitCode !== 0)
      throw new AgentdError("EIO", `repo.read failed: ${r.stderr.trim() || `exit ${r.exitCode}`}`);
    if (rest.includes("\0")) {
      throw new AgentdError(
        "EVALIDATION",
        `path ${JSON.stringify(input.path)}: binary file; repo.read returns text only`,
        { field: "path" },
      );
    }
    const truncated = Buffer.byteLength(rest) > cap;
    const content = truncated ? Buffer.from(rest).subarray(0, cap).toString("utf8") : rest;
    const lines =
      content === "" ? 0 : content.split("\n").length - (content.endsWith("\n") ? 1 : 0);
    const startLine = input.range?.start ?? 1;
    return {
      path: real,
      content,
      startLine,
      endLine: lines === 0 ? startLine - 1 : startLine + lines - 1,
      truncated,
      ...(truncated ? { note: `cut at ${cap} bytes; read further with a line range` } : {}),
    };
  },
});
