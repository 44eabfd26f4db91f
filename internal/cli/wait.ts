/**
 * `agentctl wait`: blocks until a run ends (or, with --for approval, until it waits for a
 * person), and maps the outcome to agentctl's exit codes (0 completed, 1 failed,
 * 2 cancelled, 3 waiting for a person). It only reads: it must never resolve an approval
 * or change the run.
 */
import { followEvents } from "../../clients/typescript/src/follow.ts";
import { type Run, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { EXIT, type RunClient } from "./client.ts";

export type WaitFor = "end" | "approval";

export interface WaitResult {
  /** The exit code of the outcome. */
  code: number;
  /** The run as it was when the wait ended. */
  run: Run | undefined;
  /** The approval the run waits for (code 3). */
  approvalId: string;
}

/** The exit code of a run in `state`; undefined while it has not ended. */
export function stateCode(state: RunState): number | undefined {
  switch (state) {
    case RunState.COMPLETED:
      return EXIT.OK;
    case RunState.FAILED:
      return EXIT.FAILED;
    case RunState.CANCELLED:
      return EXIT.CANCELLED;
    default:
      return undefined;
  }
}

/** True when the run is paused for an approval (someone must decide). */
function waitsForPerson(run: Run | undefined): boolean {
  return run?.state === RunState.PAUSED && run.pendingApprovalId !== "";
}

export async function waitRun(o: {
  client: RunClient;
  runId: string;
  until: WaitFor;
  signal: AbortSignal;
  onReconnect?: (err: unknown, attempt: number) => void;
}): Promise<WaitResult> {
  const get = async (): Promise<Run | undefined> =>
    (await o.client.getRun({ runId: o.runId }, { timeoutMs: 30_000, signal: o.signal })).run;
  const done = (run: Run | undefined): WaitResult | undefined => {
    const code = run === undefined ? undefined : stateCode(run.state);
    if (code !== undefined) return { code, run, approvalId: "" };
    if (o.until === "approval" && waitsForPerson(run))
      return { code: EXIT.WAITING, run, approvalId: run?.pendingApprovalId ?? "" };
    return undefined;
  };
  const first = await get();
  const now = done(first);
  if (now !== undefined) return now;
  await followEvents({
    client: o.client,
    runId: o.runId,
    afterSeq: first?.lastSeq ?? 0n,
    signal: o.signal,
    ...(o.onReconnect === undefined ? {} : { onReconnect: o.onReconnect }),
    onEvent: async (ev) => {
      // A pause may be resolved already by the time it is read: ask the run itself.
      if (o.until === "approval" && ev.payload.case === "runPaused")
        return waitsForPerson(await get()) ? "stop" : undefined;
      return undefined;
    },
  });
  const last = await get();
  return done(last) ?? { code: EXIT.WAITING, run: last, approvalId: "" };
}
