#!/usr/bin/env node
/**
 * End-to-end benchmark: `node bench/e2e.ts [--runs N] [--delays]` (what `make bench` runs;
 * never run by the tests). The demo scenario (`make demo`), timed from the inside:
 *
 *   examples/fix-failing-test is uploaded with CreateRun; the replay model
 *   (examples/fix-failing-test/transcript.json) runs the tests, reads two files, proposes a
 *   patch that waits for approval (the example's policy: repo.patch approval always), the
 *   run pauses; the benchmark approves it like a person would, as soon as the preview
 *   arrives (ResolveApproval); the worker, still holding the run (--approval-hold-ms),
 *   resumes it in the same container, the tests pass, the patch artifact is emitted and
 *   the run completes.
 *
 * The same pieces as `agentd dev` (cmd/agentd/main.ts) with its defaults: the embedded
 * event log in a temp dir, the in-process queue, the artifact store, the API server on
 * 127.0.0.1:0 (the client talks gRPC to it like agentctl), the kernel with the example's
 * policy, the Docker sandbox on the base image with one warm container (filled before the
 * clock starts, as `agentd dev` does while it starts), one worker holding approval waits
 * for 60 s. Three of them are wrapped to be timed: the engine (time spent inside its
 * `next()` calls), the kernel (`handle`, `continueAfterApproval`) and the sandbox's
 * lifecycle calls.
 *
 * The wall time of a run (CreateRun called → run.completed received, minus the time the
 * approval waited for the "person": from approval.requested received to ResolveApproval
 * being called, about nothing here) is split into:
 *   model     time inside engine steps (the replay model: with its delays at 0, by default,
 *             this is the cost of replaying; --delays keeps the demo's streaming delays);
 *   tools     the sum of tool.result durationMs (the kernel's measure of each tool's run;
 *             for the approved patch it includes the preview's dry run, whose read the
 *             call reuses instead of reading the file again);
 *   overhead  the rest: agentd's own work, shown in three parts: the sandbox lifecycle
 *             (container create or warm hand-over, find, export, diff; the removal after
 *             run.completed is shown apart, outside the wall time); the kernel around the
 *             tools (its time minus the tools': decisions, the call's events); the rest
 *             (event log, context assembly, queue, API, stream, the approval round trip).
 * Target: overhead <= 10% of the wall time. With a real model, model time dominates; the
 * replay model at delay 0 is the worst case for the share (see bench/README.md).
 *
 * A warm-up run (not reported) goes first so image and page caches are warm. Exit status:
 * 1 when the run does not end as the demo must (completed, tests red then green, the patch
 * artifact holds the fix), 2 on bad arguments or no Docker/base image; a missed target is
 * printed as MISSED, not an error.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import Docker from "dockerode";
import { ulid } from "ulid";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { createOpenAuthenticator } from "../internal/auth/tokens.ts";
import type { AgentEngine, EngineEvent } from "../internal/engine/port.ts";
import { DEFAULT_PRICE_TABLE } from "../internal/engine/pricing.ts";
import { createReplayEngine, loadTranscript } from "../internal/engine/replay-engine.ts";
import { openFileEventLog } from "../internal/eventlog/file-event-log.ts";
import { ApprovalDecision, type Event } from "../internal/gen/agentd/v1/events_pb.js";
import { RunService } from "../internal/gen/agentd/v1/run_service_pb.js";
import { createKernel, type Kernel, type KernelRun } from "../internal/kernel/kernel.ts";
import { policyImage } from "../internal/kernel/policy-schema.ts";
import { createPolicyStore } from "../internal/kernel/policy-store.ts";
import { createEnvSecretProvider } from "../internal/kernel/secrets.ts";
import { createTrustStore } from "../internal/kernel/trust-store.ts";
import { RunProjectionCache } from "../internal/projections/run-cache.ts";
import { createDockerSandbox } from "../internal/sandbox/docker-sandbox.ts";
import type { Sandbox, SandboxHandle } from "../internal/sandbox/port.ts";
import { packWorkspace, readHostDirectory } from "../internal/sandbox/workspace-archive.ts";
import { MemoryRunQueue } from "../internal/scheduler/memory-run-queue.ts";
import { createApp } from "../internal/server/app.ts";
import { createDualServer } from "../internal/server/dual-protocol.ts";
import { instrumentEventLog } from "../internal/telemetry/instrument-log.ts";
import { createLogger } from "../internal/telemetry/logger.ts";
import { startTracing } from "../internal/telemetry/sdk.ts";
import { DEFAULT_RUN_LIMITS, sandboxShape } from "../internal/worker/run-driver.ts";
import { createWorker } from "../internal/worker/worker.ts";

const EXAMPLE = fileURLToPath(new URL("../examples/fix-failing-test", import.meta.url));
const PROMPT =
  "The test suite of this repository fails. Find the bug, fix it with a minimal patch, and make sure all tests pass.";
const TARGET_SHARE = 0.1;
const TELEMETRY = process.env.AGENTD_BENCH_TELEMETRY === "1";
/** `agentd dev`'s default --approval-hold-ms. */
const APPROVAL_HOLD_MS = 60_000;
/** `agentd dev`'s default --warm-sandboxes. */
const WARM_SANDBOXES = 1;

/** Milliseconds since an arbitrary origin, sub-millisecond. */
const now = (): number => performance.now();

/** Sums the time spent inside an engine's steps (inside `next()`, not in the consumer). */
function timedEngine(inner: AgentEngine): AgentEngine & { ms: number; steps: number } {
  const t = {
    ms: 0,
    steps: 0,
    run(req: Parameters<AgentEngine["run"]>[0], signal: AbortSignal): AsyncIterable<EngineEvent> {
      t.steps++;
      const it = inner.run(req, signal)[Symbol.asyncIterator]();
      return {
        [Symbol.asyncIterator]: () => ({
          async next() {
            const t0 = now();
            try {
              return await it.next();
            } finally {
              t.ms += now() - t0;
            }
          },
          async return(v?: unknown) {
            await it.return?.(v);
            return { done: true, value: undefined };
          },
        }),
      };
    },
  };
  return t;
}

/**
 * Times the sandbox's lifecycle calls (create, find, export, diff, destroy), each with when
 * it started and ended, so the ones after run.completed (the final container removal) can
 * be told apart from the ones inside the wall time.
 */
function timedSandbox(inner: Sandbox): Sandbox & {
  ops: { op: string; start: number; end: number }[];
} {
  const t = {
    ops: [] as { op: string; start: number; end: number }[],
    async create(spec: Parameters<Sandbox["create"]>[0]) {
      return wrapHandle(await time("create", () => inner.create(spec)));
    },
    async find(runId: string) {
      const h = await time("find", () => inner.find(runId));
      return h === undefined ? undefined : wrapHandle(h);
    },
    reap: (isLive: Parameters<Sandbox["reap"]>[0]) => inner.reap(isLive),
  };
  async function time<T>(op: string, f: () => Promise<T>): Promise<T> {
    const start = now();
    try {
      return await f();
    } finally {
      t.ops.push({ op, start, end: now() });
    }
  }
  function wrapHandle(h: SandboxHandle): SandboxHandle {
    return {
      id: h.id,
      runId: h.runId,
      // Tools and previews exec (timed by the kernel as the tools' time).
      exec: (req) => h.exec(req),
      exportWorkspace: () => h.exportWorkspace(),
      killAll: () => time("killAll", () => h.killAll()),
      diff: (opts) => time("diff", () => h.diff(opts)),
      destroy: () => time("destroy", () => h.destroy()),
      detach: () => h.detach?.(),
    };
  }
  return t;
}

/** Sums the time of the kernel's handling of calls (decision, preview, events, the tool). */
function timedKernel(inner: Kernel): Kernel & { ms: number } {
  const t = {
    ms: 0,
    decideCall: inner.decideCall.bind(inner),
    async handle(run: KernelRun, call: Parameters<Kernel["handle"]>[1]) {
      const t0 = now();
      try {
        return await inner.handle(run, call);
      } finally {
        t.ms += now() - t0;
      }
    },
    async continueAfterApproval(
      run: KernelRun,
      call: Parameters<Kernel["handle"]>[1],
      approval: { approved: boolean; reason: string },
    ) {
      const t0 = now();
      try {
        return await inner.continueAfterApproval(run, call, approval);
      } finally {
        t.ms += now() - t0;
      }
    },
  };
  return t;
}

interface Figures {
  wallMs: number;
  modelMs: number;
  toolsMs: number;
  overheadMs: number;
  overheadShare: number;
  sandboxMs: number;
  sandboxOps: Record<string, number>;
  /** Sandbox calls after run.completed (outside the wall time): the container's removal. */
  afterOps: Record<string, number>;
  kernelMs: number;
  restMs: number;
  personMs: number;
  steps: number;
  toolCalls: number;
  events: number;
  perTool: Record<string, number>;
}

interface Args {
  runs: number;
  delays: boolean;
  /** `agentd dev`'s --warm-sandboxes and --approval-hold-ms (defaults: as agentd dev). */
  warm: number;
  holdMs: number;
}

async function oneRun(args: Args, docker: Docker, image: string): Promise<Figures> {
  const delays = args.delays;
  const dir = mkdtempSync(join(tmpdir(), "agentd-bench-e2e-"));
  const logger = createLogger({ level: "warn", name: "bench-e2e" });
  // AGENTD_BENCH_TELEMETRY=1 (bench/observability.ts): every append measured and counted,
  // as `agentd` does; tracing is on when the OTEL_* variables say so (started in main).
  const stored = await openFileEventLog({ dir });
  const log = TELEMETRY ? instrumentEventLog(stored) : stored;
  const queue = new MemoryRunQueue({ log, leaseTtlMs: 10_000, tenantLimit: 10 });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const runs = new RunProjectionCache({ log });
  const policy = createPolicyStore(join(EXAMPLE, "agentd-policy.yaml"), { logger });
  if (policyImage(policy.current()) !== image)
    throw new Error(`the example policy's image is ${policyImage(policy.current())}`);
  const server = createDualServer(
    createApp({ deps: { log, runs, artifacts, queue }, auth: createOpenAuthenticator(), logger }),
  );
  const addr = await server.listen("127.0.0.1", 0);
  const label = `bench-e2e-${ulid().toLowerCase()}`;
  const boxes = createDockerSandbox({
    docker,
    managedLabel: label,
    warm: args.warm,
    poolOwner: label,
  });
  // As `agentd dev` does at start (in the background there; the bench waits for it).
  await boxes.prewarm(sandboxShape(policy.current()));
  const sandbox = timedSandbox(boxes);
  const transcript = loadTranscript(join(EXAMPLE, "transcript.json"));
  const engine = timedEngine(
    createReplayEngine(delays ? { transcript } : { transcript, firstDelayMs: 0, deltaDelayMs: 0 }),
  );
  const kernel = timedKernel(
    createKernel({
      log,
      policy: () => policy.current(),
      secretProviders: [createEnvSecretProvider({})],
      trustCounters: createTrustStore({ log, runs }),
      artifacts,
    }),
  );
  const worker = createWorker({
    queue,
    workerId: "bench-e2e",
    concurrency: 1,
    leaseTtlMs: 10_000,
    blockMs: 200,
    logger,
    driver: {
      log,
      kernel,
      engine,
      sandbox,
      artifacts,
      policy: () => policy.current(),
      skillsDir: join(dir, "no-skills"),
      systemPrompt: "You are a coding agent working in a sandboxed copy of a repository.",
      model: transcript.model,
      prices: DEFAULT_PRICE_TABLE,
      limits: DEFAULT_RUN_LIMITS,
      approvalHoldMs: args.holdMs,
    },
  });
  worker.start();
  const client = createClient(
    RunService,
    createGrpcTransport({ baseUrl: `http://127.0.0.1:${addr.port}` }),
  );
  try {
    // What `agentctl run --repo examples/fix-failing-test` uploads (without agentd.patch).
    const files = await readHostDirectory(EXAMPLE, {
      skip: (p) => p === "node_modules" || p === "agentd.patch",
    });
    const workspaceTar = await packWorkspace(files);

    const t0 = now();
    const created = await client.createRun({ prompt: PROMPT, workspaceTar });
    const runId = created.run?.runId as string;
    let personMs = 0;
    let completedAt = 0;
    let last: Event | undefined;
    for await (const res of client.streamEvents({ runId, afterSeq: 0n })) {
      const received = now();
      const ev = res.event;
      if (ev === undefined) continue;
      last = ev;
      if (ev.payload.case === "approvalRequested") {
        // A person approves as soon as the preview is shown (within the worker's hold: the
        // run resumes in the same container). The time between is not agentd's.
        personMs += now() - received;
        await client.resolveApproval({
          approvalId: ev.payload.value.approvalId,
          decision: ApprovalDecision.APPROVE,
          reason: "bench",
        });
      }
      if (ev.payload.case === "runCompleted" || ev.payload.case === "runFailed") {
        completedAt = now();
      }
    }
    if (last?.payload.case !== "runCompleted") {
      throw new CheckError(
        `the run did not complete: ${last?.type} ${last?.payload.case === "runFailed" ? JSON.stringify(last.payload.value.error) : ""}`,
      );
    }
    const wallMs = completedAt - t0 - personMs;
    const events = (await log.read(runId, 0)).map((e) => e.event);
    check(events, last);

    let toolsMs = 0;
    let toolCalls = 0;
    const toolOf = new Map<string, string>();
    const perTool: Record<string, number> = {};
    for (const ev of events) {
      if (ev.payload.case === "toolCall")
        toolOf.set(ev.payload.value.callId, ev.payload.value.tool);
      if (ev.payload.case === "toolResult") {
        const ms = Number(ev.payload.value.durationMs);
        const tool = toolOf.get(ev.payload.value.callId) ?? "?";
        toolsMs += ms;
        toolCalls++;
        perTool[tool] = (perTool[tool] ?? 0) + ms;
      }
    }
    const overheadMs = wallMs - engine.ms - toolsMs;
    const kernelMs = kernel.ms - toolsMs;
    // The worker removes the container after run.completed: wait for it, then split.
    await worker.stop(5000);
    const sandboxOps: Record<string, number> = {};
    const afterOps: Record<string, number> = {};
    let sandboxMs = 0;
    for (const o of sandbox.ops) {
      // Still going when the client saw run.completed: it did not hold the run up (the
      // part before that moment still counts, it is inside the wall time).
      const after = o.end > completedAt;
      const into = after ? afterOps : sandboxOps;
      into[o.op] = (into[o.op] ?? 0) + (o.end - o.start);
      sandboxMs += Math.max(0, Math.min(o.end, completedAt) - o.start);
    }
    return {
      wallMs,
      modelMs: engine.ms,
      toolsMs,
      overheadMs,
      overheadShare: overheadMs / wallMs,
      sandboxMs,
      sandboxOps,
      afterOps,
      kernelMs,
      restMs: overheadMs - sandboxMs - kernelMs,
      personMs,
      steps: engine.steps,
      toolCalls,
      events: events.length,
      perTool,
    };
  } finally {
    await worker.stop(5000);
    await server.close(2000);
    await queue.close();
    await log.close();
    await boxes.close();
    await boxes.reap(() => false);
    rmSync(dir, { recursive: true, force: true });
  }
}

class CheckError extends Error {}

/** The run must be the demo's story: tests red, a patch with the fix, tests green. */
function check(events: readonly Event[], last: Event): void {
  const exits = events.flatMap((e) =>
    e.payload.case === "toolResult" && e.payload.value.outputJson.includes('"exitCode"')
      ? [Number(e.payload.value.exitCode)]
      : [],
  );
  if (exits.join(",") !== "1,0")
    throw new CheckError(`test runs exited ${exits.join(",")}; expected 1 then 0`);
  if (last.payload.case !== "runCompleted" || last.payload.value.patchDigest === "")
    throw new CheckError("the run completed without a patch artifact");
  if (!events.some((e) => e.payload.case === "approvalResolved"))
    throw new CheckError("the patch did not wait for an approval");
  const patched = events.find(
    (e) =>
      e.payload.case === "toolResult" &&
      e.payload.value.ok &&
      e.payload.value.outputJson.includes("max - 1"),
  );
  if (patched === undefined) throw new CheckError("no successful repo.patch with the fix");
}

function ms(n: number): string {
  return `${n.toFixed(0).padStart(7)} ms`;
}

async function main(): Promise<number> {
  let args: Args;
  try {
    const { values } = parseArgs({
      options: {
        runs: { type: "string", default: "1" },
        delays: { type: "boolean" },
        warm: { type: "string", default: String(WARM_SANDBOXES) },
        "hold-ms": { type: "string", default: String(APPROVAL_HOLD_MS) },
      },
      strict: true,
    });
    args = {
      runs: Number(values.runs),
      delays: values.delays === true,
      warm: Number(values.warm),
      holdMs: Number(values["hold-ms"]),
    };
    if (!Number.isInteger(args.runs) || args.runs < 1) throw new Error("--runs must be >= 1");
    if (!Number.isInteger(args.warm) || args.warm < 0) throw new Error("--warm must be >= 0");
    if (!Number.isInteger(args.holdMs) || args.holdMs < 0)
      throw new Error("--hold-ms must be >= 0");
  } catch (err) {
    process.stderr.write(
      `bench/e2e: ${(err as Error).message}\nusage: node bench/e2e.ts [--runs N] [--delays] [--warm N] [--hold-ms MS]\n`,
    );
    return 2;
  }
  const tracing = TELEMETRY ? await startTracing(process.env, "agentd-bench") : undefined;
  const docker = new Docker();
  const image = "agentd-sandbox-base:latest";
  try {
    await docker.ping();
    await docker.getImage(image).inspect();
  } catch (err) {
    process.stderr.write(
      `bench/e2e: needs the Docker engine and ${image} (make images): ${(err as Error).message}\n`,
    );
    return 2;
  }

  process.stdout.write(
    `bench/e2e: the demo scenario (examples/fix-failing-test, replay model, ${args.delays ? "with the demo's streaming delays" : "model delays 0"}; ${args.warm} warm sandbox(es), approval hold ${args.holdMs} ms), 1 warm-up + ${args.runs} run(s)\n`,
  );
  const all: Figures[] = [];
  try {
    await oneRun(args, docker, image); // warm-up: not reported
    for (let i = 0; i < args.runs; i++) all.push(await oneRun(args, docker, image));
  } catch (err) {
    if (err instanceof CheckError) {
      process.stderr.write(`bench/e2e: FAILED: ${err.message}\n`);
      return 1;
    }
    throw err;
  }

  // The run with the median wall time (its parts add up, unlike per-column medians).
  const r = [...all].sort((a, b) => a.wallMs - b.wallMs)[
    Math.floor((all.length - 1) / 2)
  ] as Figures;
  const share = r.overheadShare;
  const pct = (n: number) => `${((100 * n) / r.wallMs).toFixed(1).padStart(5)}%`;
  const list = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${v.toFixed(0)}`)
      .join(", ");
  process.stdout.write(
    [
      `  ${r.steps} model steps, ${r.toolCalls} tool calls, ${r.events} events${all.length > 1 ? `; the median of ${all.length} runs` : ""}`,
      `  wall (CreateRun → run.completed, approval wait excluded) ${ms(r.wallMs)}`,
      `    model     time inside engine steps             ${ms(r.modelMs)} ${pct(r.modelMs)}`,
      `    tools     sum of tool.result durationMs        ${ms(r.toolsMs)} ${pct(r.toolsMs)}   (${list(r.perTool)} ms)`,
      `    overhead  the rest: agentd's own work          ${ms(r.overheadMs)} ${pct(r.overheadMs)}`,
      `      sandbox lifecycle                            ${ms(r.sandboxMs)} ${pct(r.sandboxMs)}   (${list(r.sandboxOps)} ms)`,
      `      kernel around the tools (decide, preview, events) ${ms(r.kernelMs)} ${pct(r.kernelMs)}`,
      `      event log, context, queue, API, stream       ${ms(r.restMs)} ${pct(r.restMs)}`,
      `  still going when run.completed arrived (not holding the run up): ${list(r.afterOps)} ms`,
      `  approval wait excluded (approval.requested received → ResolveApproval) ${ms(r.personMs)}`,
      `  overhead share ${(100 * share).toFixed(1)}% (target <= ${100 * TARGET_SHARE}%): ${share <= TARGET_SHARE ? "OK" : "MISSED"}`,
      "",
    ].join("\n"),
  );
  process.stdout.write(
    `${JSON.stringify({
      bench: "e2e",
      delays: args.delays,
      warm: args.warm,
      holdMs: args.holdMs,
      runs: all,
      median: r,
      telemetry: TELEMETRY,
      tracing: tracing !== undefined,
      targets: { overheadShare: { target: TARGET_SHARE, ok: share <= TARGET_SHARE } },
    })}\n`,
  );
  await tracing?.shutdown();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench/e2e: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
