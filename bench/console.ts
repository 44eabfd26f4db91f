#!/usr/bin/env node
/**
 * The web console's figures (issue #18): `node bench/console.ts [--runs N]` (what `make
 * bench` runs; never run by the tests).
 *
 *   approval  time from `approval.requested` appended (by this process, as a worker would,
 *             on the server's Redis) to its card visible on the console's approvals page in
 *             headless chromium, p50/p90 over N runs (default 20). Target p50 ≤ 500 ms.
 *             Raw baseline in the same run: the same event reaching a plain SSE client of
 *             the tenant feed (GET /v1/events), so the ratio is what the console adds.
 *   first load  bytes transferred (headers and bodies, as chromium counts them) to show
 *             the approvals page after sign-in, and the page's own files alone.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import {
  ApprovalRequestedSchema,
  PreviewSchema,
  RunPausedSchema,
  RunStartedSchema,
} from "../internal/gen/agentd/v1/events_pb.js";
import { appendEvents, startStack, TOKENS } from "../internal/testing/api-fixtures.ts";
import { launchBrowser } from "../internal/testing/browser.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "20" } } });
const RUNS = Number(values.runs);
const TARGET_MS = 500;

const stack = await startStack();
const browser = await launchBrowser();
const token = TOKENS.acme;
try {
  // First load: sign in, then the approvals page, counting what chromium transferred.
  const page = await browser.newPage();
  const sizes: { url: string; bytes: number }[] = [];
  page.on("requestfinished", (req) => {
    void req.sizes().then((s) =>
      sizes.push({
        url: req.url(),
        bytes:
          s.requestHeadersSize + s.requestBodySize + s.responseHeadersSize + s.responseBodySize,
      }),
    );
  });
  await page.goto(`${stack.server.url}/ui/#/approvals`);
  await page.getByTestId("token-input").fill(token);
  await page.getByTestId("token-form").getByRole("button").click();
  await page.getByRole("navigation").waitFor();
  // The page keeps its live streams open (no network idle): settled once its heading shows.
  await page.getByRole("heading", { name: "Approvals" }).waitFor();
  await sleep(1000);
  const total = sizes.reduce((a, s) => a + s.bytes, 0);
  if (process.env.BENCH_DEBUG)
    console.log(sizes.map((s) => s.url.replace(stack.server.url, "")).join("\n"));
  const files = sizes.filter((s) => s.url.includes("/ui/")).reduce((a, s) => a + s.bytes, 0);

  // The raw baseline: the tenant feed over SSE, as any client would read it.
  const seen = new Map<string, number>();
  const sse = new AbortController();
  void (async () => {
    const res = await fetch(`${stack.server.url}/v1/events?types=approval.requested`, {
      headers: { authorization: `Bearer ${token}` },
      signal: sse.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += new TextDecoder().decode(value);
      for (const m of buf.matchAll(/"approvalId":"(apr_[^"]+)"/g))
        if (!seen.has(m[1] as string)) seen.set(m[1] as string, performance.now());
      buf = buf.slice(-4096);
    }
  })().catch(() => undefined);
  await sleep(500);

  const ui: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const { run } = await stack.client.createRun({ prompt: `console bench ${i}` });
    const r = { runId: run?.runId as string, sessionId: run?.sessionId as string };
    await appendEvents(stack.log, r, [
      { case: "runStarted", value: create(RunStartedSchema, { workerId: "bench", epoch: 1n }) },
    ]);
    const approvalId = `apr_${r.runId}_bench${i}`;
    const t0 = performance.now();
    await appendEvents(stack.log, r, [
      {
        case: "approvalRequested",
        value: create(ApprovalRequestedSchema, {
          approvalId,
          callId: `c${i}`,
          tool: "repo.patch",
          preview: create(PreviewSchema, {
            summary: "change src/sum.js",
            diff: "--- a/src/sum.js\n+++ b/src/sum.js\n@@ -1 +1 @@\n-return a - b\n+return a + b\n",
            files: ["src/sum.js"],
          }),
        }),
      },
      { case: "runPaused", value: create(RunPausedSchema, { reason: "approval", approvalId }) },
    ]);
    await page.getByTestId(`approval-${approvalId}`).waitFor({ timeout: 10_000 });
    ui.push(performance.now() - t0);
    for (let w = 0; w < 100 && !seen.has(approvalId); w++) await sleep(5);
    raw.push((seen.get(approvalId) ?? Number.NaN) - t0);
    await stack.client.cancelRun(r.runId, "bench");
  }
  sse.abort();
  const q = (xs: number[], p: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? Number.NaN;
  const p50 = q(ui, 0.5);
  console.log(`bench/console: ${RUNS} approvals, chromium headless, agentd server on Redis`);
  console.log(
    `  approval.requested -> card visible   p50 ${p50.toFixed(0)} ms  p90 ${q(ui, 0.9).toFixed(0)} ms  max ${Math.max(...ui).toFixed(0)} ms`,
  );
  console.log(
    `  raw baseline (SSE feed client)       p50 ${q(raw, 0.5).toFixed(0)} ms  p90 ${q(raw, 0.9).toFixed(0)} ms   ratio p50 ${(p50 / q(raw, 0.5)).toFixed(2)}x`,
  );
  console.log(
    `  first load: ${(total / 1024).toFixed(1)} KiB transferred (${sizes.length} requests), of which the console's own files ${(files / 1024).toFixed(1)} KiB`,
  );
  console.log(
    `  target p50 <= ${TARGET_MS} ms: ${p50 <= TARGET_MS ? "MET" : "MISSED"} (${p50.toFixed(0)} ms)`,
  );
  console.log(
    JSON.stringify({ bench: "console", runs: RUNS, ui, raw, firstLoadBytes: total, files }),
  );
} finally {
  await browser.close();
  await stack.stop();
}
