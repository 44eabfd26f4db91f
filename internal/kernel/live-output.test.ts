/**
 * Tool output is live: each line a command prints is in a `tool.output` event while the
 * command runs, proved by order (the command prints its next line only once the test saw
 * the last one in the log), not by a stopwatch; how soon is bench/runs.ts's figure (print to
 * event, p99). A secret printed in pieces across pauses never shows. Real container, the
 * kernel, the embedded event log.
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

describe("live tool output", () => {
  it("is in the log while the command runs: each line before the next is printed", async () => {
    const run = await newRun();
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const tag = run.runId.toLowerCase();
    const seen: string[] = [];
    const stop = new AbortController();
    // The test acknowledges each line (a file in the container) once it is in a tool.output
    // event; the command prints the next line only after that acknowledgement. Output held
    // back to the end would leave the command waiting until its timeout instead.
    const following = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case !== "toolOutput") continue;
        for (const m of p.value.chunk.matchAll(/^line (\d+)$/gm)) {
          seen.push(m[1] as string);
          await box.exec({
            argv: ["touch", `/tmp/ack-${tag}-${m[1]}`],
            timeoutMs: 60_000,
            maxOutputBytes: 1024,
          });
        }
      }
    })();
    const LINES = 5;
    // No counter in the loop (a dynamic shell would need an approval): the call's own
    // timeout, 120 s, is the safety net.
    const script = Array.from(
      { length: LINES },
      (_, i) =>
        `echo 'line ${i}'; until [ -e /tmp/ack-${tag}-${i} ]; do sleep 0.1; done; echo 'acked ${i}'`,
    );
    const result = await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: script.join("\n"), timeoutMs: 120_000 },
    });
    stop.abort();
    await following;
    const outputs = (await log.read(run.runId, 0))
      .flatMap((e) => (e.event.payload.case === "toolOutput" ? [e.event.payload.value.chunk] : []))
      .join("");
    const acked = [...outputs.matchAll(/^acked \d+$/gm)].map((m) => m[0]);
    assert.deepEqual(
      acked,
      Array.from({ length: LINES }, (_, i) => `acked ${i}`),
      `each line was in the log before the next was printed (result ${JSON.stringify(result).slice(0, 300)})`,
    );
    assert.deepEqual(
      seen,
      Array.from({ length: LINES }, (_, i) => String(i)),
      "every line once, in order",
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
