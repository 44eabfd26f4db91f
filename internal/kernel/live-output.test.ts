/**
 * Tool output is live: a command printing a line every 200 ms for 4 s has each line in a
 * `tool.output` event within 250 ms of being printed, while it runs; a secret printed in
 * pieces across pauses never shows. Real container, the kernel, the embedded event log.
 * Each line carries the host's uptime (/proc/uptime is not namespaced): print time and the
 * event's timestamp are compared on one clock.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import { createRunSecrets } from "./run-secrets.ts";
import { createRunWriter } from "./run-writer.ts";

const SECRET = "live-secret-value-9981";
const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = parsed.policy;

let dir: string;
let log: FileEventLog;
let box: SandboxHandle;
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-live-"));
  log = await openFileEventLog({ dir });
  const t = await testSandbox();
  cleanup = t.cleanup;
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
  });
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function newRun(): Promise<KernelRun> {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const writer = createRunWriter({
    log,
    ...q,
    fence,
    secrets: createRunSecrets([SECRET]),
    head: 1,
  });
  return { ...q, fence, sandbox: box, writer };
}

const uptime = (): number => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);

describe("live tool output", () => {
  it("reaches the log within 250 ms of each print, while the command runs", async (t) => {
    const run = await newRun();
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const seen: { at: number; chunk: string }[] = [];
    const stop = new AbortController();
    const following = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case === "toolOutput") seen.push({ at: Date.now(), chunk: p.value.chunk });
      }
    })();
    const lines = Array.from(
      { length: 20 },
      (_, i) => `cut -d' ' -f1 /proc/uptime; sleep 0.2 # ${i}`,
    );
    const done = kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: lines.join("\n") },
    });
    const t0 = Date.now();
    await done;
    stop.abort();
    await following;
    // Lines arrived while it ran: the first within the first second, not all at the end.
    assert.ok(seen.length >= 10, `${seen.length} tool.output events`);
    assert.ok((seen[0]?.at ?? Infinity) - t0 < 1500, "the first line came early");
    const up = uptime();
    const now = Date.now();
    const lags: number[] = [];
    for (const s of seen)
      for (const line of s.chunk.split("\n").filter((l) => /^\d+\.\d+$/.test(l))) {
        const printedAt = now - (up - Number(line)) * 1000;
        lags.push(s.at - printedAt);
      }
    lags.sort((a, b) => a - b);
    const p99 = lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))] ?? Infinity;
    assert.equal(lags.length, 20, "every line once");
    t.diagnostic(`print → tool.output: p50 ${lags[10]?.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`);
    // /proc/uptime has 10 ms resolution.
    assert.ok(
      p99 <= 250 + 10,
      `print → event p99 ${p99.toFixed(0)} ms (lags ${lags.map((l) => l.toFixed(0)).join(" ")})`,
    );
  });

  it("a secret printed in pieces across pauses never reaches an event", async () => {
    const run = await newRun();
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const a = SECRET.slice(0, 7);
    const b = SECRET.slice(7, 15);
    const c = SECRET.slice(15);
    await kernel.handle(run, {
      callId: "c2",
      tool: "process.run",
      input: {
        command: `printf '${a}'; sleep 0.4; printf '${b}'; sleep 0.4; printf '${c}'; sleep 0.3; echo`,
      },
    });
    const all = (await log.read(run.runId, 0)).map((e) => e.json).join("\n");
    assert.ok(!all.includes(SECRET));
    const outputs = (await log.read(run.runId, 0))
      .flatMap((e) => (e.event.payload.case === "toolOutput" ? [e.event.payload.value.chunk] : []))
      .join("");
    assert.ok(!outputs.includes(SECRET), outputs);
    assert.match(outputs, /\[REDACTED\]/);
  });
});
