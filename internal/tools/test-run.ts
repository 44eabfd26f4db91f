/**
 * test.run: the run's test command (the policy's tools.test, else the workspace's, see
 * command-spec.ts), optionally for one test. The result names the command and its source
 * and, when the output is in a format agentd reads (test-results/), carries `tests`: the
 * counts and each failure's name, file, line and message (for Maven and Gradle, from the
 * JUnit reports they wrote, read back: test-reports.ts). A command that exits 127 (its
 * program is not in the image) is an error naming the program and the image that has it.
 *
 * Must never: run a line other than the one the spec gives (parsing only reads what it
 * printed), or report a summary the output did not contain.
 */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { noCommandMessage, testCommandLine } from "./command-spec.ts";
import { type CommandResult, runCommand, timeoutField } from "./run-command.ts";
import { readsReports, startReports } from "./test-reports.ts";
import { createGoJsonTextStream, goJsonText } from "./test-results/go-json-text.ts";
import {
  missingModule,
  missingProgram,
  missingProgramMessage,
} from "./test-results/missing-program.ts";
import { parseTestOutput } from "./test-results/parse-test-output.ts";
import type { TestSummary } from "./test-results/summary.ts";
import { defineTool, type ToolContext } from "./tool.ts";

/** What test.run returns: the command's result, its source and the parsed results. */
export interface TestRunResult extends CommandResult {
  source: string;
  /** Absent when the output was in no format agentd reads. */
  tests?: TestSummary;
}

export const testRun = defineTool({
  name: "test.run",
  category: "exec",
  description:
    "Run the workspace's test command (set by the operator's policy, else found in the workspace: package.json, pytest/unittest, go.mod, Cargo.toml, a Makefile). Give a test name or pattern to run only matching tests, when the test command supports it. The result's `tests` gives the counts and each failing test's name, file, line and message when the output is in a known format.",
  input: z
    .object({
      name: z.string().min(1).max(500).optional().describe("A test name or pattern"),
      timeoutMs: timeoutField,
    })
    .strict(),
  async execute(ctx, input): Promise<TestRunResult> {
    const spec = ctx.commands.test;
    if (spec === undefined || spec.command.trim() === "")
      throw new AgentdError("EVALIDATION", noCommandMessage("test", ctx.commands.problem));
    // The name never reaches the shell unquoted (testCommandLine).
    const command = testCommandLine(spec, input.name);
    const goJson = spec.output === "go-json";
    const run = goJson ? goJsonContext(ctx) : { ctx, end: () => {} };
    // Maven and Gradle: their JUnit reports are read back after the command (test-reports.ts).
    const reports = readsReports(command) ? await startReports(ctx) : undefined;
    const raw = await runCommand(
      run.ctx,
      command,
      undefined,
      input.timeoutMs,
      input.name === undefined ? {} : { AGENTD_TEST_NAME: input.name },
    );
    run.end();
    throwIfNotFound("test.run", raw);
    const xml = await reports?.read();
    const tests = parseTestOutput({
      command,
      stdout: raw.stdout,
      stderr: raw.stderr,
      ...(xml === undefined ? {} : { reports: xml }),
      ...(goJson ? { format: "go-json" as const } : {}),
    });
    const result = goJson ? asGoText(raw, ctx.limits.maxOutputBytes) : raw;
    return { ...result, source: spec.source, ...(tests === undefined ? {} : { tests }) };
  },
});

/**
 * Exit 127 is the shell's "command not found" (and `python3 -m pytest` without pytest its
 * Python form): an error that names the program and the image that has it, never a test
 * result (a timed-out or killed call is not one).
 */
export function throwIfNotFound(tool: string, r: CommandResult): void {
  if (r.timedOut || r.oomKilled) return;
  const m =
    r.exitCode === 127
      ? missingProgram(r.command, r.stderr || r.stdout)
      : r.exitCode === 1
        ? missingModule(r.command, r.stderr)
        : undefined;
  if (m !== undefined)
    throw new AgentdError("ENOTFOUND", missingProgramMessage(tool, r.command, m));
}

/**
 * test2json costs 3 to 5 times the bytes of the text it stands for (each line wrapped in
 * its event, passing tests' output kept), and the text is what the result keeps: the
 * command may print this much more before the output cap stops it.
 */
const GO_JSON_OUTPUT_FACTOR = 4;

/**
 * The context of a `go test -json` line: a larger output cap for the JSON (the text is
 * cut to the real cap, asGoText), the live output shown as the text it stands for.
 */
function goJsonContext(ctx: ToolContext): { ctx: ToolContext; end: () => void } {
  const limits = {
    ...ctx.limits,
    maxOutputBytes: ctx.limits.maxOutputBytes * GO_JSON_OUTPUT_FACTOR,
  };
  const onOutput = ctx.onOutput;
  if (onOutput === undefined) return { ctx: { ...ctx, limits }, end: () => {} };
  const stream = createGoJsonTextStream();
  return {
    ctx: {
      ...ctx,
      limits,
      onOutput: (name, chunk) => {
        if (name !== "stdout") return onOutput(name, chunk);
        const text = stream.push(chunk);
        if (text !== "") onOutput(name, text);
      },
    },
    end: () => {
      const rest = stream.end();
      if (rest !== "") onOutput("stdout", rest);
    },
  };
}

/** The result of a `go test -json` line with its stdout as text, at most `max` bytes (the tail: go's summary lines come last). */
function asGoText(raw: CommandResult, max: number): CommandResult {
  const text = goJsonText(raw.stdout);
  const bytes = Buffer.byteLength(text);
  if (bytes <= max) return { ...raw, stdout: text };
  const tail = Buffer.from(text)
    .subarray(bytes - max)
    .toString("utf8")
    .replace(/^\uFFFD+/, "");
  return {
    ...raw,
    stdout: `[agentd: ${bytes - max} bytes of go test's output left out]\n${tail}`,
    truncated: true,
  };
}
