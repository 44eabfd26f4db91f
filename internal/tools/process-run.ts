/** process.run: a shell command line in the workspace, with a timeout and capped output. */
import { z } from "zod";
import { runCommand, timeoutField } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const processRun = defineTool({
  name: "process.run",
  category: "exec",
  description:
    "Run a shell command (sh -c) in the workspace. There is no network unless the policy allows hosts; then HTTP(S) goes through agentd's egress proxy (HTTP_PROXY/HTTPS_PROXY are set) and a refused host answers 403 with the reason. Returns exit code, stdout and stderr (capped). The whole process group is killed at the timeout.",
  input: z
    .object({
      command: z
        .string()
        .min(1)
        .max(16 * 1024)
        .describe("Shell command line, e.g. 'npm test -- --grep parser'"),
      cwd: z
        .string()
        .min(1)
        .optional()
        .describe("Directory relative to the workspace root; default the root"),
      timeoutMs: timeoutField,
    })
    .strict(),
  async execute(ctx, input) {
    return runCommand(ctx, input.command, input.cwd, input.timeoutMs);
  },
});
