/**
 * process.run: a command in the workspace, with a timeout and capped output: a shell command
 * line (`sh -c`), or an argv list run as it is (no shell: for images without one).
 */
import { z } from "zod";
import { argvLine, runCommand, timeoutField } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const processRun = defineTool({
  name: "process.run",
  category: "exec",
  description:
    "Run a command in the workspace: `command`, a shell command line (sh -c), or `argv`, a program and its arguments run without a shell (for images that have none). There is no network unless the policy allows hosts; then HTTP(S) goes through agentd's egress proxy (HTTP_PROXY/HTTPS_PROXY are set) and a refused host answers 403 with the reason. Returns exit code, stdout and stderr (capped). The whole process group is killed at the timeout.",
  input: z
    .object({
      command: z
        .string()
        .min(1)
        .max(16 * 1024)
        .optional()
        .describe("Shell command line, e.g. 'npm test -- --grep parser'"),
      argv: z
        .array(z.string().max(16 * 1024))
        .min(1)
        .max(256)
        .optional()
        .describe("Program and arguments, run without a shell, e.g. ['python3', '-m', 'pytest']"),
      cwd: z
        .string()
        .min(1)
        .optional()
        .describe("Directory relative to the workspace root; default the root"),
      timeoutMs: timeoutField,
    })
    .strict()
    .refine((i) => (i.command === undefined) !== (i.argv === undefined), {
      message: "give command or argv, not both",
      path: ["command"],
    })
    .refine((i) => i.argv === undefined || (i.argv[0] ?? "") !== "", {
      message: "the program (argv[0]) must not be empty",
      path: ["argv"],
    })
    .refine((i) => i.argv === undefined || argvLine(i.argv).length <= 16 * 1024, {
      message: "is longer than 16384 characters as a command line",
      path: ["argv"],
    }),
  async execute(ctx, input) {
    if (input.argv !== undefined)
      return runCommand(ctx, { argv: input.argv }, input.cwd, input.timeoutMs);
    return runCommand(ctx, input.command as string, input.cwd, input.timeoutMs);
  },
});
