/**
 * AGENTD_TEST_CRASH_AT: fault injection for tests, read here (the composition root) only.
 * A comma-separated list of CreateRun's named points (internal/api/crash-points.ts) and
 * DeleteRun's (internal/lifecycle/delete-run.ts); the
 * server SIGKILLs itself when a request reaches one, as a power cut would stop it. Unset in
 * production: the hook is then absent and CreateRun pays nothing.
 *
 * Must never: accept an unknown point silently (a typo would make a crash test pass
 * without crashing), or do anything but die at the named point.
 */
import {
  CREATE_RUN_CRASH_POINTS,
  type CreateRunCrashPoint,
} from "../../internal/api/crash-points.ts";
import {
  DELETE_RUN_CRASH_POINTS,
  type DeleteRunCrashPoint,
} from "../../internal/lifecycle/delete-run.ts";
import { UsageError } from "./config.ts";

const POINTS: readonly string[] = [...CREATE_RUN_CRASH_POINTS, ...DELETE_RUN_CRASH_POINTS];

export function crashPointFrom(
  env: Record<string, string | undefined>,
): ((point: CreateRunCrashPoint | DeleteRunCrashPoint) => void) | undefined {
  const raw = env.AGENTD_TEST_CRASH_AT;
  if (raw === undefined || raw === "") return undefined;
  const points = new Set<string>();
  for (const p of raw.split(",").map((s) => s.trim())) {
    if (!POINTS.includes(p))
      throw new UsageError(
        `AGENTD_TEST_CRASH_AT: ${JSON.stringify(p.slice(0, 80))} is not a crash point (one of ${POINTS.join(", ")})`,
      );
    points.add(p);
  }
  return (point) => {
    if (points.has(point)) process.kill(process.pid, "SIGKILL");
  };
}
