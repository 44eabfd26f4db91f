/**
 * The one-process tenant ledgers of `agentd dev` counted again from a real embedded log
 * (rebuild-day-usage.ts, rebuild-artifact-bytes.ts): today's token and cost use per tenant
 * is the growth of each run's cumulative usage.updated events today, nothing of another
 * day; artifactBytes are the stored blobs the runs' events and the receipts name, counted
 * once per tenant, never a blob the store no longer holds.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { openFileEventLog } from "../eventlog/file-event-log.ts";
import { RunQueuedSchema, UsageUpdatedSchema } from "../gen/agentd/v1/events_pb.js";
import { FileRunDeletion } from "../lifecycle/file-run-deletion.ts";
import { utcDay } from "./day-usage.ts";
import { MemoryArtifactLedger } from "./memory-artifact-bytes.ts";
import { MemoryDayLedger } from "./memory-day-usage.ts";
import { rebuildArtifactBytes } from "./rebuild-artifact-bytes.ts";
import { rebuildDayUsage } from "./rebuild-day-usage.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-ledgers-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const usage = (input: number, output: number, cost: number) => ({
  case: "usageUpdated" as const,
  value: create(UsageUpdatedSchema, {
    usage: { inputTokens: BigInt(input), outputTokens: BigInt(output) },
    costMicros: BigInt(cost),
  }),
});

it("today's use and the stored bytes per tenant come back from the log and the store", async () => {
  const log = await openFileEventLog({ dir: join(dir, "log") });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const deletion = new FileRunDeletion({ log, receiptsPath: join(dir, "receipts.json") });
  const ws = await artifacts.put(Buffer.from(`workspace ${ulid()}`));
  const run = async (tenantId: string, steps: ReturnType<typeof usage>[], digest = "") => {
    const runId = ulid();
    const queued = create(RunQueuedSchema, { tenantId, prompt: "p", workspaceDigest: digest });
    await log.append({
      runId,
      sessionId: runId,
      tenantId,
      payload: { case: "runQueued", value: queued },
    });
    for (const payload of steps) await log.append({ runId, sessionId: runId, payload });
  };
  // Cumulative counts: acme's two runs used 150 + 40 tokens, globex's 7.
  await run("acme", [usage(80, 20, 1000), usage(120, 30, 2500)], ws.digest);
  await run("acme", [usage(30, 10, 400)], ws.digest);
  await run("globex", [usage(5, 2, 70)]);
  await run("idle", []);
  const now = Date.now();
  const day = new MemoryDayLedger();
  assert.equal(await rebuildDayUsage(day, deletion.ledgerSource(), now), 197);
  assert.deepEqual(await day.useOf("acme", utcDay(now)), { tokens: 190, costMicros: 2900 });
  assert.deepEqual(await day.useOf("globex", utcDay(now)), { tokens: 7, costMicros: 70 });
  assert.deepEqual(await day.useOf("idle", utcDay(now)), { tokens: 0, costMicros: 0 });
  const tomorrow = new MemoryDayLedger();
  assert.equal(await rebuildDayUsage(tomorrow, deletion.ledgerSource(), now + 86_400_000), 0);

  // Bytes: acme's shared workspace once; a receipt of globex; a digest no longer stored.
  const up = await artifacts.put(Buffer.from(`upload ${ulid()}`.padEnd(100, ".")));
  await deletion.receipts.hold("globex", up.digest, now + 60_000);
  await deletion.receipts.hold("globex", "f".repeat(64), now + 60_000);
  const bytes = new MemoryArtifactLedger();
  await rebuildArtifactBytes(bytes, deletion.ledgerSource(), artifacts);
  assert.equal(await bytes.bytesOf("acme"), ws.size, "one blob of two runs: counted once");
  assert.equal(await bytes.bytesOf("globex"), up.size, "the receipt's blob; the absent one not");
  await log.close();
});
