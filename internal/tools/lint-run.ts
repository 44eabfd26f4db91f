/**
 * lint.run: the run's lint command (the policy's tools.lint, else the workspace's, see
 * command-spec.ts). The result names the command and its source; exit 127 is an error naming
 * the missing program and the image that has it (as for test.run).
 */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { noCommandMessage } from "./command-spec.ts";
import { runCommand, timeoutField } from "./run-command.ts";
import { throwIfNotFound } from "./test-run.ts";
import { defineTool } from "./tool.ts";

export const lintRun = defineTool({
  name: "lint.run",
  category: "exec",
  description:
    "Run the workspace's lint command (set by the operator's policy, else found in the workspace) and return its findings.",
  input: z.object({ timeoutMs: timeoutField }).strict(),
  async execute(ctx, input) {
    const spec = ctx.commands.lint;
    if (spec === undefined || spec.command.trim() === "")
      throw new AgentdError("EVALIDATION", noCommandMessage("lint", ctx.commands.problem));
    const result = await runCommand(ctx, spec.command, undefined, input.timeoutMs);
    throwIfNotFound("lint.run", result); // the linter is not in the image: say which has it
    return { ...result, source: spec.source };
  },
});
