/** lint.run: the workspace's configured lint command. */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { runCommand, timeoutField } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const lintRun = defineTool({
  name: "lint.run",
  category: "exec",
  description:
    "Run the workspace's lint command (configured by the operator) and return its findings.",
  input: z.object({ timeoutMs: timeoutField }).strict(),
  async execute(ctx, input) {
    const command = ctx.commands.lint;
    if (command === undefined || command.trim() === "") {
      throw new AgentdError(
        "EVALIDATION",
        "no lint command is configured for this workspace (policy: tools.lint)",
      );
    }
    return runCommand(ctx, command, undefined, input.timeoutMs);
  },
});
