/**
 * The entry of agentd's GitHub Action (clients/github-action/action.yml runs it through
 * run.sh, with the agentd image's node and agentctl, or the runner's): reads the inputs
 * from the environment once, runs the action, writes the step's outputs and summary and
 * exits with the outcome's code (0 completed, or waiting when not waiting for approvals;
 * 1 failed; 2 cancelled; 4 a request failed; 64 a bad input).
 *
 * Imports nothing but Node's own modules and its siblings: it runs from the action's
 * checkout, beside whatever agentctl the image has.
 */
import { appendFileSync } from "node:fs";
import { runAction } from "./action.ts";
import { agentctlEnv, createAgentctl } from "./agentctl.ts";
import { InputError, readInputs } from "./inputs.ts";
import { createLog } from "./log.ts";
import { writeOutputs } from "./outputs.ts";

async function main(): Promise<number> {
  const write = (s: string): void => void process.stdout.write(s);
  const log = createLog(write);
  let inputs: ReturnType<typeof readInputs>;
  try {
    inputs = readInputs(process.env);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    log.annotate("error", "agentd action: bad input", err.message);
    // Outputs are set in every case (a later step may read them with if: always()).
    const file = process.env.GITHUB_OUTPUT;
    if (file)
      writeOutputs(file, {
        "run-id": "",
        outcome: "error",
        "patch-path": "",
        "approval-id": "",
        "run-url": "",
      });
    return 64;
  }
  const ctl = createAgentctl(
    process.env.AGENTCTL || "agentctl",
    agentctlEnv(process.env, inputs),
    write,
  );
  // A cancelled job: the runner sends SIGINT, then SIGTERM, to the step's process (this one,
  // or run.sh, which stops the container, where this is PID 1: it ignores any signal it has
  // no handler for). Stop waiting and stop agentctl; the run itself goes on.
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.once(sig, () => {
      ctl.stop();
      log.info(`${sig}: stopped waiting; the run goes on (agentctl cancel RUN stops it)`);
      process.exit(130);
    });
  const result = await runAction(inputs, ctl, log);
  if (inputs.outputFile !== undefined) writeOutputs(inputs.outputFile, result.outputs);
  else
    log.info(
      `GITHUB_OUTPUT is not set (not on a runner?): outputs ${JSON.stringify(result.outputs)}`,
    );
  if (inputs.summaryFile !== undefined) appendFileSync(inputs.summaryFile, result.summary);
  return result.exitCode;
}

process.exitCode = await main();
