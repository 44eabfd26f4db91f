/**
 * The write that makes a CreateRun's run exist: its first event and its queue record, as one
 * step when the server has a RunAdmission (scheduler/admission.ts), else append then enqueue
 * (in-process routers of tests). The idempotency key claimed for the run is released only
 * when the run is known not to exist: a failure whose outcome is unknown (a timeout after
 * the script ran) keeps the claim, so a retry finds the run, or takes the key over once the
 * claim is stale and the run never appeared.
 *
 * Must never: answer an error for a run that was admitted when it can tell, release a key
 * whose run may exist, or leave a run queued in the log that no queue record follows.
 */
import { create } from "@bufbuild/protobuf";
import { AgentdError } from "../errors.ts";
import type { AppendRequest } from "../eventlog/port.ts";
import { RunFailedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { applyEvent, emptyRun } from "../projections/run-projection.ts";
import type { ApiDeps } from "./deps.ts";

export interface FirstEvent extends AppendRequest {
  tenantId: string;
}

/** Stores the run (log and queue) and answers it as its first event makes it. */
export async function admitRun(
  deps: ApiDeps,
  first: FirstEvent,
  priority: number,
  release: () => Promise<void>,
): Promise<Run> {
  if (deps.admission !== undefined) {
    try {
      const ev = await deps.admission.admit({ first: { ...first, expectedSeq: 0 }, priority });
      deps.crashPoint?.("createRun.afterAdmit");
      return applyEvent(emptyRun(first.runId), ev.event);
    } catch (err) {
      const run = await afterFailedAdmit(deps, first.runId, release);
      if (run !== undefined) return run;
      throw err;
    }
  }
  let ev: Awaited<ReturnType<ApiDeps["log"]["append"]>>;
  try {
    ev = await deps.log.append({ ...first, expectedSeq: 0 });
  } catch (err) {
    await release();
    throw err;
  }
  deps.crashPoint?.("createRun.afterAppend");
  const run = applyEvent(emptyRun(first.runId), ev.event);
  if (deps.queue !== undefined) await enqueueOrFail(deps, first, run.priority);
  return run;
}

/**
 * The admission failed: when the run is stored anyway (the script ran, its answer was lost)
 * it is the answer; when it is surely absent the key is released; when that cannot be told
 * the key stays claimed (a retry sorts it out) and the error stands.
 */
async function afterFailedAdmit(
  deps: ApiDeps,
  runId: string,
  release: () => Promise<void>,
): Promise<Run | undefined> {
  let head: Awaited<ReturnType<ApiDeps["log"]["head"]>>;
  try {
    // Stored but maybe not on the replicas (--redis-min-replicas-acked): confirmed first.
    const read = () => deps.log.head(runId);
    head = await (deps.log.replicated?.(read) ?? read());
  } catch {
    return undefined;
  }
  if (head === undefined) {
    await release();
    return undefined;
  }
  return deps.runs.get(runId, head).catch(() => undefined);
}

/** Without an admission: a run that cannot be queued is failed, visibly. */
async function enqueueOrFail(deps: ApiDeps, first: FirstEvent, priority: number): Promise<void> {
  try {
    await deps.queue?.enqueue({
      runId: first.runId,
      tenantId: first.tenantId,
      sessionId: first.sessionId,
      priority,
    });
  } catch (err) {
    await deps.log
      .append({
        runId: first.runId,
        sessionId: first.sessionId,
        expectedSeq: 1,
        payload: {
          case: "runFailed",
          value: create(RunFailedSchema, {
            error: { code: "EQUEUE", message: "the run could not be queued" },
          }),
        },
      })
      .catch(() => undefined);
    throw new AgentdError(
      "EUNAVAILABLE",
      "the run queue cannot be reached; the run was not started",
      { cause: err },
    );
  }
}
