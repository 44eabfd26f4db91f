/** Every capability tool, by name. The kernel routes calls here after its decision. */
import { AgentdError } from "../errors.ts";
import { lintRun } from "./lint-run.ts";
import { processRun } from "./process-run.ts";
import { repoPatch } from "./repo-patch.ts";
import { repoRead } from "./repo-read.ts";
import { repoSearch } from "./repo-search.ts";
import { setupRun } from "./setup-run.ts";
import { testRun } from "./test-run.ts";
import type { Tool, ToolContext } from "./tool.ts";

export const TOOLS: readonly Tool[] = [
  repoRead,
  repoSearch,
  repoPatch,
  processRun,
  testRun,
  lintRun,
  setupRun,
] as Tool[];

const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

export function toolByName(name: string): Tool | undefined {
  return BY_NAME.get(name);
}

/**
 * Validates `input` against the tool's schema and runs it. Validation errors name the
 * field (EVALIDATION); nothing runs before the input is valid.
 */
export async function invokeTool(ctx: ToolContext, name: string, input: unknown): Promise<unknown> {
  const tool = toolByName(name);
  if (tool === undefined) {
    throw new AgentdError(
      "EVALIDATION",
      `unknown tool ${JSON.stringify(name)}; tools: ${TOOLS.map((t) => t.name).join(", ")}`,
      { field: "tool" },
    );
  }
  const parsed = tool.input.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join(".") || "(input)";
    throw new AgentdError(
      "EVALIDATION",
      `${name}: ${field}: ${issue?.message ?? "invalid input"}`,
      { field },
    );
  }
  return tool.execute(ctx, parsed.data);
}
