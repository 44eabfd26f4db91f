/**
 * The reaper's question about a container's run: is it still going? A run this log knows
 * is live until it ends; a run it does not know is another deployment's (on the same
 * Docker engine) unless this deployment deleted it: a tombstone says so, and a deleted
 * run's container (a paused run's, kept because a secret-carrying call ran in it) goes.
 *
 * Must never: call a run of another deployment ended (an unknown run with no tombstone).
 */
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { isTerminal } from "../projections/run-projection.ts";
import type { RunDeletionStore } from "./port.ts";

/** Whether the run of a container is live (a predicate for Sandbox.reap). */
export function runIsLive(
  runs: { get(runId: string): Promise<Run | undefined> },
  deletion: Pick<RunDeletionStore, "tombstone">,
): (runId: string) => Promise<boolean> {
  return async (runId) => {
    const run = await runs.get(runId);
    if (run !== undefined) return !isTerminal(run.state);
    return (await deletion.tombstone(runId)) === undefined;
  };
}
