/**
 * For tests: runs the action's composite step the way a GitHub runner does. It reads
 * action.yml, gives every input its value (the test's, else the declared default),
 * evaluates the step's `env:` mapping (`${{ inputs.NAME }}`), sets what a runner sets
 * (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, RUNNER_TEMP, GITHUB_ACTION_PATH, GITHUB_RUN_ID…) and
 * runs the step's `run:` with `bash --noprofile --norc -eo pipefail`, as `shell: bash` does.
 * Then it reads the output file as the runner reads it.
 *
 * Must never: take a shortcut a runner would not (call main.ts directly, or set an INPUT_*
 * variable that action.yml does not map).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

export const ACTION_DIR = dirname(fileURLToPath(import.meta.url));

export interface ActionYml {
  inputs: Record<string, { required?: boolean; default?: string }>;
  outputs: Record<string, { value: string }>;
  runs: {
    using: string;
    steps: { id?: string; shell?: string; run?: string; env?: Record<string, string> }[];
  };
}

export function readActionYml(): ActionYml {
  return parse(readFileSync(join(ACTION_DIR, "action.yml"), "utf8")) as ActionYml;
}

/** `${{ inputs.NAME }}` in `text`, replaced by the input's value. */
export function evalInputs(text: string, inputs: Record<string, string>): string {
  return text.replace(/\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}/g, (_, name: string) => {
    if (!(name in inputs)) throw new Error(`action.yml uses inputs.${name}, which is not declared`);
    return inputs[name] as string;
  });
}

/** GITHUB_OUTPUT as the runner parses it: `name=value` lines and `name<<DELIM` blocks. */
export function parseOutputFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line === "") continue;
    const heredoc = /^([^=<]+)<<(.+)$/.exec(line);
    if (heredoc !== null) {
      const [, name, delim] = heredoc as unknown as [string, string, string];
      const value: string[] = [];
      for (i++; i < lines.length && lines[i] !== delim; i++) value.push(lines[i] as string);
      if (i >= lines.length) throw new Error(`output ${name}: no closing delimiter`);
      out[name] = value.join("\n");
      continue;
    }
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`GITHUB_OUTPUT line without = or <<: ${JSON.stringify(line)}`);
    out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

export interface StepRun {
  code: number | null;
  /** The step's log (stdout and stderr, as the runner shows them). */
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  /** The action's outputs, evaluated from action.yml's `outputs:` mapping. */
  actionOutputs: Record<string, string>;
  summary: string;
  runnerTemp: string;
}

/** Runs the composite step with `inputs` (by input name) and the runner's `env`. */
export async function runStep(
  inputs: Record<string, string>,
  env: Record<string, string>,
  /** onSpawn: the step's process id (a runner signals it alone when the job is cancelled). */
  opts: { workspace: string; timeoutMs?: number; onSpawn?: (pid: number) => void },
): Promise<StepRun> {
  const yml = readActionYml();
  const values: Record<string, string> = {};
  for (const [name, spec] of Object.entries(yml.inputs)) values[name] = spec.default ?? "";
  for (const [name, v] of Object.entries(inputs)) {
    if (!(name in yml.inputs)) throw new Error(`input ${name} is not declared in action.yml`);
    values[name] = v;
  }
  const step = yml.runs.steps[0];
  if (step?.run === undefined || step.shell !== "bash")
    throw new Error("the step is not a bash run step");
  const temp = mkdtempSync(join(opts.workspace, "..", "runner-temp-"));
  const outputFile = join(temp, "output");
  const summaryFile = join(temp, "summary");
  writeFileSync(outputFile, "");
  writeFileSync(summaryFile, "");
  const stepEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      v !== undefined &&
      !k.startsWith("INPUT_") &&
      !k.startsWith("AGENTD_") &&
      !k.startsWith("GITHUB_")
    )
      stepEnv[k] = v;
  }
  Object.assign(stepEnv, {
    GITHUB_ACTIONS: "true",
    GITHUB_ACTION_PATH: ACTION_DIR,
    GITHUB_WORKSPACE: opts.workspace,
    GITHUB_OUTPUT: outputFile,
    GITHUB_STEP_SUMMARY: summaryFile,
    RUNNER_TEMP: temp,
    ...env,
  });
  for (const [k, v] of Object.entries(step.env ?? {})) stepEnv[k] = evalInputs(String(v), values);
  // As `shell: bash` runs a step: the script in a file, `bash --noprofile --norc -eo pipefail FILE`.
  const script = join(temp, "step.sh");
  writeFileSync(script, step.run);
  const child = spawn("bash", ["--noprofile", "--norc", "-eo", "pipefail", script], {
    cwd: opts.workspace,
    env: stepEnv,
    stdio: ["ignore", "pipe", "pipe"],
    timeout: opts.timeoutMs ?? 280_000,
  });
  opts.onSpawn?.(child.pid as number);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const outputs = parseOutputFile(readFileSync(outputFile, "utf8"));
  const actionOutputs: Record<string, string> = {};
  for (const [name, o] of Object.entries(yml.outputs)) {
    const m = /^\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)\s*\}\}$/.exec(o.value);
    if (m === null || m[1] !== step.id)
      throw new Error(`output ${name} is not mapped to the step's outputs: ${o.value}`);
    actionOutputs[name] = outputs[m[2] as string] ?? "";
  }
  return {
    code,
    stdout,
    stderr,
    outputs,
    actionOutputs,
    summary: readFileSync(summaryFile, "utf8"),
    runnerTemp: temp,
  };
}
