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
 * then appends `log.rewound` on the stored head and `run.failed` (EREWOUND) right after it,
 * so every reader sees the loss where it happened. Both appends are conditional on the
 * stored head (expectedSeq), not fenced: the loss may have taken the lease epoch back too.
 *
 * Must never: seal anything on the stored head but these two records, or fence them with
 * an epoch the store may no longer hold.
 */
import { create } from "@bufbuild/protobuf";
import { isAgentdError } from "../errors.ts";
import type { LogRewoundError } from "../eventlog/log-rewound-error.ts";
import { LogRewoundSchema, RunFailedSchema } from "../gen/agentd/v1/events_pb.js";
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
  await d.deps.log
    .append({
      ...base,
      expectedSeq: storedSeq + 1,
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
