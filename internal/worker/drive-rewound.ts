/**
 * The end of a drive that found its run's stored log behind what it had seen (EREWOUND:
 * Redis lost acknowledged events — an AOF cut, an `everysec` crash, a failover to a lagging
 * replica). The run FAILS, by decision: the lost events may have recorded calls that ran
 * and changed the workspace, so neither the model nor a person can be told exactly what
 * happened, and at-most-once can no longer be shown from the log. Pausing would keep a run
 * whose record is incomplete waiting to go on; failing stops every writer for good
 * (terminal is terminal, including a second worker whose lease epoch the loss took back).
 *
 * What it does: counts the loss (agentd_log_rewound_total{found_by="writer"}), logs both
 * heads, removes the container (nothing of the run may still run when its end is written),
 * then appends `log.rewound` on the stored head, an `interrupted` result for every call the
 * stored log holds open (its tool.started may be among the lost events: whether it ran is
 * unknown), and `run.failed` (EREWOUND) right after, so every reader sees the loss where
 * it happened and no run ends with a call that has no result. Both appends are conditional on the
 * stored head (expectedSeq), not fenced: the loss may have taken the lease epoch back too.
 *
 * Must never: seal anything on the stored head but these records, or fence them with an
 * epoch the store may no longer hold.
 */
import { create } from "@bufbuild/protobuf";
import { projectHistory } from "../engine/context.ts";
import { isAgentdError } from "../errors.ts";
import type { LogRewoundError } from "../eventlog/log-rewound-error.ts";
import { LogRewoundSchema, RunFailedSchema, ToolResultSchema } from "../gen/agentd/v1/events_pb.js";
import { observeToolResult } from "../telemetry/event-metrics.ts";
import { metrics } from "../telemetry/metrics.ts";
import type { Drive } from "./drive.ts";
import { endedElsewhere } from "./drive-end.ts";
import { costOf, usageOf } from "./drive-usage.ts";
import type { DriveOutcome } from "./run-driver.ts";

/** Tries at recording the loss when other writers keep moving the stored head. */
const RECORD_TRIES = 5;

export async function rewound(d: Drive, err: LogRewoundError): Promise<DriveOutcome> {
  metrics.logRewound.inc({ found_by: "writer" });
  d.deps.logger?.error(
    { runId: d.runId, epoch: d.epoch, expected: err.expected, stored: err.stored },
    "the stored event log lost acknowledged events: the run is failed (log.rewound)",
  );
  await d.box?.destroy();
  d.box = undefined;
  let storedSeq = err.stored.seq;
  let storedHash = err.stored.hash;
  for (let i = 0; i < RECORD_TRIES; i++) {
    try {
      await record(d, err, storedSeq, storedHash);
      return "failed";
    } catch (e) {
      if (isAgentdError(e, "EENDED")) return endedElsewhere(d);
      if (!isAgentdError(e, "ECONFLICT")) throw e;
      // Someone appended on the stored head meanwhile: record the loss after that.
      const h = await d.deps.log.head(d.runId);
      if (h?.ended) return endedElsewhere(d);
      storedSeq = h?.seq ?? 0;
      storedHash = h?.hash ?? "";
    }
  }
  throw err;
}

/** log.rewound then run.failed, each on the exact head before it. */
async function record(
  d: Drive,
  err: LogRewoundError,
  storedSeq: number,
  storedHash: string,
): Promise<void> {
  const base = { runId: d.runId, sessionId: d.sessionId };
  await d.deps.log.append({
    ...base,
    expectedSeq: storedSeq,
    payload: {
      case: "logRewound",
      value: create(LogRewoundSchema, {
        expectedSeq: BigInt(err.expected.seq),
        expectedHash: err.expected.hash,
        storedSeq: BigInt(storedSeq),
        storedHash,
        writer: d.deps.workerId,
      }),
    },
  });
  const head = await answerStoredOpenCalls(d);
  await d.deps.log
    .append({
      ...base,
      expectedSeq: head,
      payload: {
        case: "runFailed",
        value: create(RunFailedSchema, {
          error: {
            code: "EREWOUND",
            message: `the stored log lost events after seq ${storedSeq} (this worker had seen seq ${err.expected.seq}); what they recorded is unknown, so the run cannot go on`,
          },
          usage: usageOf(d),
          costMicros: BigInt(costOf(d)),
        }),
      },
    })
    .catch(async (e: unknown) => {
      // Someone appended between the two (a cancel request, an approval): the run still
      // fails, right after whatever it was.
      if (!isAgentdError(e, "ECONFLICT")) throw e;
      await d.deps.log.append({
        ...base,
        payload: {
          case: "runFailed",
          value: create(RunFailedSchema, {
            error: {
              code: "EREWOUND",
              message: `the stored log lost events after seq ${storedSeq}`,
            },
          }),
        },
      });
    });
}

/** What an open call of a rewound log is answered: its fate is among what was lost. */
export const REWOUND_UNKNOWN =
  "the stored log lost events recorded after this call; whether it ran, and what it did, is unknown. It was not run again";

/**
 * Answers each call the stored log holds open, each append conditional on the head it read
 * (another append meanwhile: read again, so no call is answered twice). Returns the head
 * once none is open.
 */
async function answerStoredOpenCalls(d: Drive): Promise<number> {
  const base = { runId: d.runId, sessionId: d.sessionId };
  for (let tries = 0; ; ) {
    const stored = (await d.deps.log.read(d.runId, 0)).map((e) => e.event);
    const [p] = projectHistory(stored).pending;
    if (p === undefined) return stored.length;
    // A call the stored log shows denied gets its denial, as the kernel words it.
    const denied = p.approval?.state === "denied";
    const result = create(ToolResultSchema, {
      callId: p.callId,
      ok: false,
      error: denied
        ? {
            code: "EAPPROVAL_DENIED",
            message: `a person denied this call${p.approval?.reason ? `: ${p.approval.reason}` : ""}`,
          }
        : { code: "interrupted", message: REWOUND_UNKNOWN },
    });
    try {
      await d.deps.log.append({
        ...base,
        expectedSeq: stored.length,
        payload: { case: "toolResult", value: result },
      });
      observeToolResult(p.tool, "none", result);
    } catch (e) {
      if (!isAgentdError(e, "ECONFLICT") || ++tries >= RECORD_TRIES) throw e;
    }
  }
}
