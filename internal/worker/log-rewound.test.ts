/**
 * A rewound log is refused, against real processes (issue #26, point 4): a server and a
 * worker on a real redis-server (appendonly yes, appendfsync always and everysec), a run
 * in the middle of a long call, and Redis restarted after an AOF cut repaired with
 * `redis-check-aof --fix` — the writes acknowledged after the cut point are gone, among
 * them the call's tool.call. The still-running worker's next append is refused; it records
 * log.rewound on the stored head and fails the run; nothing is sealed on the older head (no
 * result of the call whose tool.call was lost); the chain verifies; a follower started
 * before the cut is told to resync (DATA_LOSS) and is never handed the new chain; and
 * `agentctl verify --head` with the pre-cut head fails naming the seq after which events
 * were lost.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { status } from "@grpc/grpc-js";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { aofOffset, cutAofTo } from "../testing/aof-cut.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, payloads, type RunWatch } from "../testing/run-watch.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));

/** echo, then a long sleep (the cut happens during it), then echo, then an answer. */
const COMMANDS = ["echo one", "sleep 20", "echo three"];
/**
 * The model's second answer (the sleep) waits for the test: while it waits, the worker
 * appends nothing, so the AOF's size then is a cut point with a known log before it.
 */
let asked: () => void = () => undefined;
let release: () => void = () => undefined;
let askedForSleep = new Promise<void>((r) => {
  asked = r;
});
let released = new Promise<void>((r) => {
  release = r;
});
async function model({ body }: StubRequest): Promise<StubReply> {
  const messages = (body?.messages ?? []) as { role: string }[];
  const n = messages.filter((m) => m.role === "tool").length;
  if (n === 1) {
    asked();
    await released;
  }
  const command = COMMANDS[n];
  if (command === undefined) return { chunks: textReply(["done"]) };
  return {
    chunks: toolCallsReply([
      { id: `call_${n + 1}`, name: "process_run", arguments: JSON.stringify({ command }) },
    ]),
  };
}

for (const appendfsync of ["always", "everysec"] as const) {
  describe(`appendfsync ${appendfsync}`, () => {
    let c: Cluster;
    let w: RunWatch;
    before(async () => {
      // A long lease: the restart must not cost the worker its lease (the drive must be the
      // same one before and after the cut — the writer that saw the lost events).
      c = await startCluster({ workers: 1, leaseTtlMs: 30_000, appendfsync, script: model });
      w = createRunWatch(c);
    });
    after(async () => {
      await c?.stop();
    });

    it("an AOF cut under a running call: refused, log.rewound, run failed, follower resyncs, verify --head fails", {
      timeout: 240_000,
    }, async () => {
      askedForSleep = new Promise<void>((r) => {
        asked = r;
      });
      released = new Promise<void>((r) => {
        release = r;
      });
      const s = await w.submit("rewound");
      await askedForSleep;
      // The worker waits for the model: everything it appended so far (the first call and
      // its result) is in the AOF before this offset; what comes next is after it.
      const before = await w.until("the run's head", () => c.log.head(s.runId));
      const offset = aofOffset(c.redis.dir);
      release();
      const sleep = await w.waitEvent(s, "toolCall", (v) => v.inputJson.includes("sleep"));
      await w.waitEvent(s, "policyDecision", (v) => v.callId === sleep.callId);
      // The worker now runs `sleep 20`: it appends nothing until it ends. The head it saw:
      const seen = await w.until("the run's head", () => c.log.head(s.runId));
      await w.until("the follower to have the head", () =>
        s.stream.events.some((e) => Number(e.seq) === seen.seq) ? true : undefined,
      );

      let report = "";
      await c.redis.restart({
        whileDown: () => {
          report = cutAofTo(c.redis.dir, offset);
        },
      });
      const stored = await w.until("Redis back after the cut", () => c.log.head(s.runId));
      assert.ok(
        stored.seq <= before.seq && stored.seq < seen.seq,
        `the cut lost acknowledged events (head ${stored.seq}, was ${seen.seq}); redis-check-aof said:\n${report}`,
      );

      const run = await w.waitTerminal(s.runId, 120_000);
      assert.equal(run.state, RunState.FAILED, c.diagnostics());
      assert.equal(run.error?.code, "EREWOUND");

      const events = (await c.log.read(s.runId, 0)).map((e) => e.event);
      assert.equal(verifyChain((await c.log.read(s.runId, 0)).map((e) => e.json)).ok, true);
      // After the stored head: the record of the loss and the run's end, nothing else.
      assert.deepEqual(
        events.slice(stored.seq).map((e) => e.type),
        ["log.rewound", "run.failed"],
        `events after the stored head ${stored.seq}: ${events.map((e) => `${e.seq} ${e.type}`).join(", ")}`,
      );
      const [rec] = payloads(events, "logRewound");
      assert.ok(rec !== undefined);
      assert.equal(Number(rec.storedSeq), stored.seq);
      assert.equal(rec.storedHash, stored.hash);
      assert.ok(Number(rec.expectedSeq) >= seen.seq, `expected_seq ${rec.expectedSeq}`);
      // The head the writer named is one the follower was given before the cut.
      const was = s.stream.events.find((e) => Number(e.seq) === Number(rec.expectedSeq));
      assert.equal(was?.hash, rec.expectedHash);
      // No result of a call whose tool.call was lost, no second result for one call.
      const calls = new Set(payloads(events, "toolCall").map((v) => v.callId));
      const results = payloads(events, "toolResult").map((v) => v.callId);
      assert.ok(!calls.has(sleep.callId), "the cut took the sleep's tool.call");
      assert.deepEqual(
        results.filter((id) => !calls.has(id)),
        [],
        "a result of a lost call",
      );
      assert.equal(new Set(results).size, results.length, "two results for one call");

      // The follower started before the cut: told to resync, never given the new chain.
      const end = await s.stream.done;
      assert.equal(end.status.code, status.DATA_LOSS, end.status.details);
      assert.ok(
        !s.stream.events.some((e) => e.type === "log.rewound"),
        "the follower got an event of the chain past the loss",
      );
      const seqs = s.stream.events.map((e) => Number(e.seq));
      assert.deepEqual(
        seqs,
        seqs.map((_, i) => i + 1),
      );

      // agentctl verify with the head the client saw before the cut.
      const env = { ...process.env, AGENTD_ADDR: c.server.url };
      const v = spawnSync(AGENTCTL, ["verify", s.runId, "--head", `${seen.seq}:${seen.hash}`], {
        encoding: "utf8",
        env,
      });
      assert.equal(v.status, 1, `${v.stdout}${v.stderr}`);
      assert.match(v.stdout, new RegExp(`lost events after seq ${stored.seq}\\b`));
      // Without --head: the log's own record of the loss fails it too.
      const plain = spawnSync(AGENTCTL, ["verify", s.runId], { encoding: "utf8", env });
      assert.equal(plain.status, 1, `${plain.stdout}${plain.stderr}`);
      assert.match(plain.stdout, /hash chain OK .* but the stored log lost events after seq/);
      // The worker said so.
      assert.match(
        c.workers.map((p) => p.output()).join("\n"),
        /the stored event log lost acknowledged events/,
      );
    });
  });
}
