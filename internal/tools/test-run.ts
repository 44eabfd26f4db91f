/**
 * test.run: the run's test command (the policy's tools.test, else the workspace's, see
 * command-spec.ts), optionally for one test. The result names the command and its source.
 */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { noCommandMessage, testCommandLine } from "./command-spec.ts";
import { runCommand, timeoutField } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const testRun = defineTool({
  name: "test.run",
  category: "exec",
  description:
    "Run the workspace's test command (set by the operator's policy, else found in the workspace: package.json, pytest/unittest, go.mod, Cargo.toml, a Makefile). Give a test name or pattern to run only matching tests, when the test command supports it.",
  input: z
    .object({
      name: z.string().min(1).max(500).optional().describe("A test name or pattern"),
      timeoutMs: timeoutField,
    })
    .strict(),
  async execute(ctx, input) {
    const spec = ctx.commands.test;
    if (spec === undefined || spec.command.trim() === "")
      throw new AgentdError("EVALIDATION", noCommandMessage("test", ctx.commands.problem));
    // The name never reaches the shell unquoted (testCommandLine).
    const command = testCommandLine(spec, input.name);
    const result = await runCommand(
      ctx,
      command,
      undefined,
      input.timeoutMs,
      input.name === undefined ? {} : { AGENTD_TEST_NAME: input.name },
    );
    return { ...result, source: spec.source };
  },
});
