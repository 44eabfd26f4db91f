/**
 * The end a drive writes when the stored log lost events (drive-rewound.ts), against the
 * embedded log: the stored log holds two calls without results (one started, one whose
 * tool.started may be among the lost events) and one a person denied. After `log.rewound`,
 * each gets one result — `interrupted` saying its fate is unknown, the denial for the
 * denied one — then `run.failed` (EREWOUND): no run
 * ends with a call that has no result, and the chain verifies.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { LogRewoundError } from "../eventlog/log-rewound-error.ts";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  ApprovalResolvedSchema,
  ToolCallSchema,
  ToolStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { Sandbox } from "../sandbox/port.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { queueRun, testImagePolicy } from "../testing/worker-fixtures.ts";
import { openDrive } from "./drive.ts";
import { REWOUND_UNKNOWN, rewound } from "./drive-rewound.ts";

let dir: string;
let log: FileEventLog;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-drive-rewound-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("answers every call the stored log holds open, then fails the run", async () => {
  const run = await queueRun(log, { prompt: "anything" });
  const call = (callId: string) =>
    log.append({
      ...run,
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, {
          callId,
          tool: "process.run",
          inputJson: '{"command":"make"}',
        }),
      },
    });
  await call("call_a");
  await log.append({
    ...run,
    payload: {
      case: "toolStarted",
      value: create(ToolStartedSchema, { callId: "call_a", workerId: "w0" }),
    },
  });
  await call("call_b");
  // call_c waited for a person, who denied it: its answer is the denial.
  await call("call_c");
  await log.append({
    ...run,
    payload: {
      case: "approvalRequested",
      value: create(ApprovalRequestedSchema, {
        approvalId: "ap_c",
        callId: "call_c",
        tool: "process.run",
      }),
    },
  });
  await log.append({
    ...run,
    payload: {
      case: "approvalResolved",
      value: create(ApprovalResolvedSchema, {
        approvalId: "ap_c",
        decision: ApprovalDecision.DENY,
        reason: "no",
      }),
    },
  });
  const stored = await log.head(run.runId);
  assert.ok(stored !== undefined);
  const deps = stubDriverDeps({
    log,
    policy: testImagePolicy(),
    // Never touched: the drive holds no container.
    sandbox: {} as Sandbox,
    artifacts: new FsArtifactStore(join(dir, "artifacts")),
    baseURL: "http://127.0.0.1:9",
  });
  const epoch = await log.bumpEpoch(run.runId);
  const d = await openDrive(deps, run.runId, epoch, { stop: new AbortController().signal });
  try {
    const err = new LogRewoundError(
      run.runId,
      { seq: stored.seq + 3, hash: "a".repeat(64) },
      { seq: stored.seq, hash: stored.hash },
    );
    assert.equal(await rewound(d, err), "failed");
  } finally {
    d.close();
  }
  const logged = await log.read(run.runId, 0);
  const after = logged.slice(stored.seq).map((e) => e.event.payload);
  assert.deepEqual(
    after.map((p) => p.case),
    ["logRewound", "toolResult", "toolResult", "toolResult", "runFailed"],
  );
  const results = after.flatMap((p) => (p.case === "toolResult" ? [p.value] : []));
  assert.deepEqual(
    results.map((r) => [r.callId, r.ok, r.error?.code, r.error?.message]),
    [
      ["call_a", false, "interrupted", REWOUND_UNKNOWN],
      ["call_b", false, "interrupted", REWOUND_UNKNOWN],
      ["call_c", false, "EAPPROVAL_DENIED", "a person denied this call: no"],
    ],
  );
  const end = after.at(-1);
  assert.ok(end?.case === "runFailed");
  assert.equal(end.value.error?.code, "EREWOUND");
  assert.equal(verifyChain(logged.map((e) => e.json)).ok, true);
});
