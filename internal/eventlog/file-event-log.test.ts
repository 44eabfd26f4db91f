import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { ulid } from "ulid";
import { delta, queued, runEventLogConformance } from "./conformance.ts";
import { type FileEventLog, openFileEventLog } from "./file-event-log.ts";
import { verifyChain } from "./hash-chain.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-filelog-"));
let current: FileEventLog | undefined;

runEventLogConformance("file", {
  async open() {
    current = await openFileEventLog({ dir });
    return current;
  },
  async writers(n) {
    // One process owns a data directory: its writers share the one instance.
    return Array.from({ length: n }, () => current as FileEventLog);
  },
  async restart() {
    // A crash: the old instance is dropped without close(); its lock is taken over.
    current = await openFileEventLog({ dir });
    return current;
  },
  async rewind(runId, toSeq) {
    // Files restored from an older backup: the run's lines after toSeq are gone.
    const path = join(dir, "runs", `${runId}.ndjson`);
    const lines = readFileSync(path, "utf8").split("\n").slice(0, toSeq);
    writeFileSync(path, `${lines.join("\n")}\n`);
    current = await openFileEventLog({ dir });
    return current;
  },
  rewindsLive: false,
  async cleanup() {
    rmSync(dir, { recursive: true, force: true });
  },
});

it("file log: cuts a torn last line left by a crash and goes on from the last full event", async () => {
  const d = mkdtempSync(join(tmpdir(), "agentd-torn-"));
  try {
    const log = await openFileEventLog({ dir: d });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    await log.append(delta(runId, "a"));
    await log.close();
    const path = join(d, "runs", `${runId}.ndjson`);
    appendFileSync(path, '{"eventId":"01TORN","seq":"3"');
    const again = await openFileEventLog({ dir: d });
    assert.equal((await again.head(runId))?.seq, 2);
    const ev = await again.append(delta(runId, "b"));
    assert.equal(ev.seq, 3);
    const lines = readFileSync(path, "utf8").trimEnd().split("\n");
    assert.equal(lines.length, 3);
    assert.equal(verifyChain(lines).ok, true);
    await again.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

it("file log: a second process cannot open a data directory in use", async () => {
  const d = mkdtempSync(join(tmpdir(), "agentd-lock-"));
  try {
    const { writeFileSync } = await import("node:fs");
    // pid 1 is always alive: a live owner other than us.
    writeFileSync(join(d, "LOCK"), "1");
    await assert.rejects(openFileEventLog({ dir: d }), /in use by process 1/);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

it("a feed line lost in a crash (after the run's write) is added again at the next start", async () => {
  const d = mkdtempSync(join(tmpdir(), "agentd-filefeed-"));
  try {
    let log = await openFileEventLog({ dir: d });
    const runId = ulid();
    await log.append(queued(runId, "t1"));
    for (let i = 0; i < 3; i++) await log.append(delta(runId, `x${i}`));
    await log.close();
    // The crash: the last feed line never reached the disk, and a torn half line did.
    const path = join(d, "feed.ndjson");
    const lines = readFileSync(path, "utf8").trimEnd().split("\n");
    writeFileSync(path, `${lines.slice(0, -1).join("\n")}\n{"r":"torn`);
    log = await openFileEventLog({ dir: d });
    const feed = (await log.readFeed("", 100)).filter((e) => e.runId === runId);
    const seqs = feed.flatMap((e) =>
      Array.from({ length: e.toSeq - e.fromSeq + 1 }, (_, i) => e.fromSeq + i),
    );
    assert.deepEqual(seqs, [1, 2, 3, 4], "every stored event is in the feed once");
    assert.equal(feed.at(-1)?.tenantId, "t1");
    await log.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

it("a feed with a hole in the middle (a lost or garbled line) covers every event after a restart", async () => {
  const d = mkdtempSync(join(tmpdir(), "agentd-filefeed-"));
  try {
    let log = await openFileEventLog({ dir: d });
    const runId = ulid();
    await log.append(queued(runId, "t1"));
    for (let i = 0; i < 4; i++) await log.append(delta(runId, `y${i}`));
    await log.close();
    const path = join(d, "feed.ndjson");
    const lines = readFileSync(path, "utf8").trimEnd().split("\n");
    lines[2] = "{garbled";
    writeFileSync(path, `${lines.join("\n")}\n`);
    log = await openFileEventLog({ dir: d });
    const feed = await log.readFeed("", 100);
    assert.equal(feed[2]?.runId, "", "the garbled line keeps its id and covers nothing");
    const seqs = feed
      .filter((e) => e.runId === runId)
      .flatMap((e) => Array.from({ length: e.toSeq - e.fromSeq + 1 }, (_, i) => e.fromSeq + i))
      .sort((a, b) => a - b);
    assert.deepEqual(seqs, [1, 2, 3, 4, 5], "the hole is filled, nothing twice");
    await log.close();
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
