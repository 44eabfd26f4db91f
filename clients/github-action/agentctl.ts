/**
 * Runs agentctl (the agentd image's, or the one the `agentctl` input names) as a child
 * process and collects what it printed; its stderr is relayed to the step's log, prefixed.
 *
 * Must never: put the token on agentctl's command line (it travels in AGENTD_TOKEN, which
 * `ps` does not show), or pass the action's INPUT_* variables on to agentctl.
 */
import { spawn } from "node:child_process";
import type { ActionInputs } from "./inputs.ts";
import { relayLines } from "./log.ts";

export interface CtlResult {
  /** agentctl's exit code (see `agentctl --help`); 4 when it could not be started. */
  code: number;
  stdout: string;
  stderr: string;
}

export interface Agentctl {
  (args: readonly string[]): Promise<CtlResult>;
  /** Sends SIGTERM to the agentctl running now (a cancelled job: stop waiting). */
  stop(): void;
}

/** The environment agentctl gets: the caller's, without INPUT_*, plus where agentd is. */
export function agentctlEnv(
  base: Record<string, string | undefined>,
  inputs: Pick<ActionInputs, "address" | "token" | "caFile">,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) {
    if (v !== undefined && !k.startsWith("INPUT_") && !k.startsWith("AGENTD_")) env[k] = v;
  }
  env.AGENTD_ADDR = inputs.address;
  if (inputs.token !== undefined) env.AGENTD_TOKEN = inputs.token;
  if (inputs.caFile !== undefined) env.AGENTD_CA_FILE = inputs.caFile;
  env.NO_COLOR = "1";
  return env;
}

/** agentctl's own "agentctl: " at the start of its lines (relayLines puts it back). */
function unprefixed(text: string): string {
  return text.replace(/^agentctl: /gm, "");
}

/**
 * An Agentctl running `bin` with `env`; each stderr line goes to `relay` prefixed with
 * "agentctl: " as it arrives (a long wait shows its notes live).
 */
export function createAgentctl(
  bin: string,
  env: NodeJS.ProcessEnv,
  relay: (s: string) => void,
): Agentctl {
  const live = new Set<ReturnType<typeof spawn>>();
  const run = (args: readonly string[]): Promise<CtlResult> =>
    new Promise((resolve) => {
      const child = spawn(bin, [...args], { env, stdio: ["ignore", "pipe", "pipe"] });
      live.add(child);
      let stdout = "";
      let stderr = "";
      let pending = "";
      child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
      child.stderr.setEncoding("utf8").on("data", (c: string) => {
        stderr += c;
        pending += c;
        const cut = pending.lastIndexOf("\n");
        if (cut >= 0) {
          relay(relayLines("agentctl: ", unprefixed(pending.slice(0, cut))));
          pending = pending.slice(cut + 1);
        }
      });
      child.on("error", (err) =>
        resolve({ code: 4, stdout, stderr: `cannot start ${bin}: ${err.message}` }),
      );
      child.on("close", (code, signal) => {
        live.delete(child);
        if (pending !== "") relay(relayLines("agentctl: ", unprefixed(pending)));
        resolve({ code: code ?? (signal === null ? 4 : 130), stdout, stderr });
      });
    });
  return Object.assign(run, {
    stop: () => {
      for (const child of live) child.kill("SIGTERM");
    },
  });
}
