/**
 * setup.run: the run's setup step (the policy's tools.setup, else `.agent/config.yaml`
 * commands.setup, else the lockfile's, see setup-detect.ts), run once by the driver before
 * the model's first step (worker/setup/drive-setup.ts), through the kernel like any call.
 * The result names the command, its source and its ecosystem. Over an exact cache hit the
 * driver marks the spec `cached`: the call answers `{ cached: true, digest, savedByRun,
 * command, exitCode: 0 }` without running anything.
 *
 * The model has it too (to install again after it changed a lockfile), but what it runs is
 * decided by the policy and the uploaded workspace, never by the model; only the driver's
 * setup before the first step saves a cache. Must never run anything but that line.
 */
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { runCommand } from "./run-command.ts";
import { defineTool } from "./tool.ts";

export const SETUP_TOOL = "setup.run";

/**
 * Clients prefer what the restored cache holds over asking the registry (npm checks every
 * package's metadata otherwise, which needs the network a cached run may not have).
 */
const SETUP_ENV: Record<string, string> = {
  npm_config_prefer_offline: "true",
  // npm ci's audit and funding lookups are registry calls a dependency install needs not.
  npm_config_audit: "false",
  npm_config_fund: "false",
  npm_config_update_notifier: "false",
};

export const setupRun = defineTool({
  name: SETUP_TOOL,
  category: "exec",
  description:
    "Install the workspace's dependencies again with its setup command (agentd already ran it once before your first step; its result is in the history).",
  input: z.object({}).strict(),
  async execute(ctx) {
    const spec = ctx.commands.setup;
    if (spec === undefined || spec.command.trim() === "")
      throw new AgentdError(
        "EVALIDATION",
        "no setup command: the policy sets none (tools.setup), .agent/config.yaml has no commands.setup, and no lockfile or manifest was found",
      );
    // An exact cache hit (set by the driver, worker/setup-exact-hit.ts): the restored
    // archive already is this line's outcome; nothing runs.
    if (spec.cached !== undefined)
      return {
        cached: true,
        digest: spec.cached.digest,
        savedByRun: spec.cached.savedByRun,
        command: spec.command,
        exitCode: 0,
        source: spec.source,
        ecosystem: spec.ecosystem,
      };
    const result = await runCommand(ctx, spec.command, undefined, undefined, SETUP_ENV);
    return { ...result, source: spec.source, ecosystem: spec.ecosystem };
  },
});
