/**
 * The sink runner in one process on the embedded log: a sink that starts "now" saves where
 * it starts before anything is delivered (a restart never jumps past what came meanwhile),
 * and a sink whose filter matches nothing still moves its cursor on (progress), and a
 * receiver down for many attempts loses nothing and keeps the order.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { delta, queued } from "../eventlog/conformance.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { ApprovalRequestedSchema } from "../gen/agentd/v1/events_pb.js";
import { createLogger } from "../telemetry/logger.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../testing/webhook-receiver.ts";
import type { WebhookConfig } from "./config.ts";
import { FileExportState } from "./file-export-state.ts";
import { OLDEST, startSinkRunner } from "./runner.ts";
import { deliverWebhook } from "./webhook.ts";

const KEY = Buffer.from("runner-test-key-0123456789");
const dir = mkdtempSync(join(tmpdir(), "agentd-runner-"));
let log: FileEventLog;
let hook: WebhookReceiver;
const state = new FileExportState(join(dir, "export"));
const logger = createLogger({ level: "silent" });

before(async () => {
  log = await openFileEventLog({ dir, fsync: false });
  hook = await startWebhookReceiver(KEY);
});
after(async () => {
  await log?.close();
  await hook?.close();
  rmSync(dir, { recursive: true, force: true });
});

function sink(name: string, types: string[]): WebhookConfig {
  return {
    name,
    type: "webhook",
    url: hook.url,
    key: KEY,
    types,
    tenants: [],
    start: "now",
    headers: {},
    timeoutMs: 2000,
    maxAttempts: 2,
    backoff: { initialMs: 10, maxMs: 20 },
  };
}

function start(s: WebhookConfig) {
  return startSinkRunner(s, (item, attempt, signal) => deliverWebhook(s, item, attempt, signal), {
    log,
    state,
    holder: "me",
    logger,
    leaseTtlMs: 5000,
  });
}

async function until(what: string, probe: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + 120_000; // generous: a loaded machine never fails it
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`waited 120 s for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const approval = (runId: string, id: string) => ({
  runId,
  sessionId: "s1",
  payload: {
    case: "approvalRequested" as const,
    value: create(ApprovalRequestedSchema, { approvalId: id, callId: "c", tool: "repo.patch" }),
  },
});

it("a sink starting now saves its start at once; what comes while it is down arrives after", async () => {
  const runId = ulid();
  await log.append(queued(runId, "t1")); // before the sink existed: not its business
  const s = sink("approvals", ["approval.requested"]);
  let runner = start(s);
  await until("the start saved", async () => (await state.cursor(s.name)) !== "");
  assert.notEqual(await state.cursor(s.name), OLDEST, "the feed had entries: its head");
  await runner.stop();
  // Down: an approval comes. The old runner would have started at the head again.
  await log.append(approval(runId, "apr-1"));
  runner = start(s);
  await until("apr-1 delivered", () =>
    hook.deliveries.some((d) => d.type === "approval.requested"),
  );
  await runner.stop();
  const got = hook.deliveries.filter((d) => d.runId === runId);
  assert.deepEqual(
    got.map((d) => d.type),
    ["approval.requested"],
    "the earlier run.queued was before the sink's start",
  );
  assert.ok(got.every((d) => d.signed));
});

it("a filter that matches nothing still moves the cursor on", async () => {
  const s = sink("rare", ["run.failed"]);
  const runner = start(s);
  await until("the start saved", async () => (await state.cursor(s.name)) !== "");
  const first = await state.cursor(s.name);
  const runId = ulid();
  await log.append(queued(runId, "t1"));
  for (let i = 0; i < 5; i++) await log.append(delta(runId, `x${i}`));
  const head = await log.feedHead();
  await until("progress saved past the new entries", async () =>
    (await state.cursor(s.name)).startsWith(`${head}:`),
  );
  await runner.stop();
  assert.notEqual(await state.cursor(s.name), first);
  assert.equal(hook.deliveries.filter((d) => d.runId === runId).length, 0, "nothing matched");
});

it("a receiver down for many attempts: the event arrives once it is back, in order, nothing dead-lettered", async () => {
  // The schedule with a small base (the real one spans 6.5+ minutes, retry-schedule.test.ts):
  // down for 12 deliveries of the first event, then up. Counted in deliveries, not time.
  const DOWN_FOR = 12;
  let refused = 0;
  const down = await startWebhookReceiver(KEY, (d) => {
    if (d.type !== "approval.requested" || refused >= DOWN_FOR) return 200;
    refused++;
    return 503;
  });
  try {
    const s: WebhookConfig = {
      ...sink("outage", ["approval.requested"]),
      url: down.url,
      maxAttempts: 20,
      backoff: { initialMs: 10, maxMs: 40 },
    };
    const runner = start(s);
    await until("the start saved", async () => (await state.cursor(s.name)) !== "");
    const runId = ulid();
    await log.append(queued(runId, "t1"));
    await log.append(approval(runId, "apr-a"));
    await log.append(approval(runId, "apr-b"));
    await until("both approvals accepted", () => down.accepted.size === 2);
    await runner.stop();
    const got = down.deliveries.filter((d) => d.runId === runId);
    const first = got.filter((d) => d.body.includes("apr-a"));
    assert.equal(first.length, DOWN_FOR + 1, "retried through the outage");
    assert.deepEqual(
      first.map((d) => d.attempt),
      Array.from({ length: DOWN_FOR + 1 }, (_, i) => i + 1),
    );
    // Order kept: the second event only after the first was delivered.
    const lastOfFirst = got.lastIndexOf(first.at(-1) as (typeof got)[0]);
    assert.ok(got.slice(0, lastOfFirst).every((d) => d.body.includes("apr-a")));
    assert.deepEqual(await state.deadLetters(s.name, 10), [], "nothing dead-lettered");
    assert.equal(down.accepted.get(first[0]?.eventId ?? ""), 1);
  } finally {
    await down.close();
  }
});
