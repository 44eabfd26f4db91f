/**
 * A live event stream's guard against its run being deleted under it: a run may be deleted
 * once it ended, and a follower still catching up on its history would then wait for a
 * terminal event that no longer exists. Every GONE_CHECK_MS the run's head is read; once the
 * run is gone the follow is stopped and the stream ends with NOT_FOUND.
 * Must never: end a stream whose run exists, or keep a timer after the stream ended.
 */
import { AgentdError } from "../errors.ts";
import type { ApiDeps } from "./deps.ts";

/** How often an open live stream checks that its run still exists (one head read). */
export const GONE_CHECK_MS = 5_000;

export interface RunGoneWatch {
  /** Aborts when the caller's signal does or when the run is gone. */
  readonly signal: AbortSignal;
  /** Throws NOT_FOUND when the run was found gone. */
  throwIfGone(): void;
  stop(): void;
}

export function watchRunGone(
  deps: Pick<ApiDeps, "log">,
  runId: string,
  signal: AbortSignal,
  everyMs = GONE_CHECK_MS,
): RunGoneWatch {
  const gone = new AbortController();
  let found = false;
  const timer = setInterval(() => {
    deps.log.head(runId).then(
      (head) => {
        if (head !== undefined || found) return;
        found = true;
        gone.abort(new AgentdError("ENOTFOUND", `run ${runId} was deleted`));
      },
      () => undefined, // a failed read proves nothing: the next one decides
    );
  }, everyMs);
  timer.unref();
  return {
    signal: AbortSignal.any([signal, gone.signal]),
    throwIfGone() {
      if (found) throw new AgentdError("ENOTFOUND", `run ${runId} was deleted`);
    },
    stop() {
      clearInterval(timer);
    },
  };
}

/** After a stored read that came up short: NOT_FOUND when the run was deleted meanwhile. */
export async function throwIfDeleted(deps: Pick<ApiDeps, "log">, runId: string): Promise<void> {
  if ((await deps.log.head(runId)) === undefined)
    throw new AgentdError("ENOTFOUND", `run ${runId} was deleted`);
}
