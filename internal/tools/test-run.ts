/** test.run: the workspace's configured test command, optionally for one test. */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { runCommand, shellQuote, timeoutField } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const testRun = defineTool({
  name: "test.run",
  category: "exec",
  description:
    "Run the workspace's test command (configured by the operator). Give a test name or pattern to run only matching tests, when the test command supports it.",
  input: z
    .object({
      name: z.string().min(1).max(500).optional().describe("A test name or pattern"),
      timeoutMs: timeoutField,
    })
    .strict(),
  async execute(ctx, input) {
    const base = ctx.commands.test;
    if (base === undefined || base.trim() === "") {
      throw new AgentdError(
        "EVALIDATION",
        "no test command is configured for this workspace (policy: tools.test)",
      );
    }
    // "{name}" in the configured command is replaced by the quoted name; otherwise the
    // quoted name is appended. The name never reaches the shell unquoted.
    const quoted = input.name === undefined ? "" : shellQuote(input.name);
    const command = base.includes("{name}")
      ? base.replaceAll("{name}", quoted)
      : input.name === undefined
        ? base
        : `${base} ${quoted}`;
    return runCommand(
      ctx,
      command,
      undefined,
      input.timeoutMs,
      input.name === undefined ? {} : { AGENTD_TEST_NAME: input.name },
    );
  },
});
