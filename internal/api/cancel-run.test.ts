/**
 * CancelRun is never lost and terminal is terminal, with real components: a private Redis,
 * two in-process API instances on it (each its own connection, event log, projection cache
 * and queue, called through connect's router transport with the real error interceptor and
 * bearer-token principals), and a simulated worker on the same queue that resumes runs, makes tool
 * calls, asks for new approvals and honours run.cancel_requested, as the run driver does.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type Interceptor,
} from "@connectrpc/connect";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createTokenAuthenticator, hashToken, type Role } from "../auth/tokens.ts";
import { isAgentdError } from "../errors.ts";
import { queued } from "../eventlog/conformance.ts";
import { type EventPayload, TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { isRunEnded } from "../eventlog/run-ended-error.ts";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  RunCancelledSchema,
  RunCompletedSchema,
  RunPausedSchema,
  RunResumedSchema,
  RunStartedSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { type Run, RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { RunProjectionCache } from "../projections/run-cache.ts";
import { projectRun } from "../projections/run-projection.ts";
import { type Claim, isLeaseLost } from "../scheduler/port.ts";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { until } from "../testing/until.ts";
import { sweepPausedRuns } from "./approvals.ts";
import { cancelRunHandler } from "./cancel-run.ts";
import { kPrincipal } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { errorInterceptor } from "./interceptors/errors.ts";
import { registerRunService } from "./routes.ts";

const TENANT = "acme";
const ALL: Role[] = ["submit", "read", "approve"];
const TOKENS = { alice: `alice-${ulid()}`, bob: `bob-${ulid()}` };
const auth = createTokenAuthenticator(
  Object.entries(TOKENS).map(([name, token]) => ({
    digest: Buffer.from(hashToken(token), "hex"),
    principal: { name, tenantId: TENANT, roles: new Set(ALL) },
  })),
);

/** The caller's principal from its bearer token (roles are not what these tests are about). */
const bearer: Interceptor = (next) => async (req) => {
  req.contextValues.set(kPrincipal, auth.authenticate(req.header.get("authorization")));
  return next(req);
};

/** Failures the error interceptor reported as internal (a bug, never expected here). */
const internalErrors: unknown[] = [];
let redis: TestRedis;
let dir: string;
const closers: (() => Promise<void> | void)[] = [];

/** A connection of its own, closed after the suite. */
function connect(): Redis {
  const c = new Redis(redis.url);
  c.on("error", () => undefined);
  closers.push(() => c.disconnect());
  return c;
}

/**
 * One API instance (as one `agentd server` would have it) on the shared Redis; instances
 * with the same `prefix` share one deployment's log and queue.
 */
function startApi(prefix: string, opts: { cancelWaitMs?: number } = {}) {
  const client = connect();
  const log = new RedisEventLog({ client, prefix });
  const queue = new RedisRunQueue({ client, prefix, leaseTtlMs: 5000 });
  closers.push(
    () => log.close(),
    () => queue.close(),
  );
  const deps: ApiDeps = {
    log,
    runs: new RunProjectionCache({ log }),
    artifacts: new FsArtifactStore(join(dir, "artifacts")),
    queue,
    ...opts,
  };
  const transport = createRouterTransport((router) => registerRunService(router, deps), {
    router: { interceptors: [errorInterceptor((err) => internalErrors.push(err)), bearer] },
  });
  return { deps, rpc: createClient(RunService, transport) };
}
type Api = ReturnType<typeof startApi>;

const as = (who: keyof typeof TOKENS, timeoutMs?: number) => ({
  headers: { authorization: `Bearer ${TOKENS[who]}` },
  ...(timeoutMs === undefined ? {} : { timeoutMs }),
});

/** A run as CreateRun leaves it: `run.queued` in the log and on the queue. */
async function newRun(api: Api, kind: "pauses" | "long"): Promise<string> {
  const runId = ulid();
  const sessionId = `${kind}-${runId}`;
  await api.deps.log.append({ ...queued(runId, TENANT, sessionId) });
  await api.deps.queue?.enqueue({ runId, tenantId: TENANT, sessionId, priority: 5 });
  return runId;
}

/**
 * The worker side, as run-driver.ts behaves: claims, resumes with a compare-and-append on
 * the head it read, makes tool calls (fenced), checks for run.cancel_requested between
 * steps and then appends run.cancelled, asks for a new approval and pauses ("pauses" runs),
 * or keeps working ("long" runs). Every log error but EENDED/ECONFLICT is recorded.
 */
class SimWorker {
  readonly unexpected: unknown[] = [];
  readonly #log: RedisEventLog;
  readonly #queue: RedisRunQueue;
  readonly #stop = new AbortController();
  readonly #loop: Promise<void>;
  readonly #driving = new Set<Promise<void>>();

  constructor(prefix: string) {
    const client = connect();
    this.#log = new RedisEventLog({ client, prefix });
    this.#queue = new RedisRunQueue({ client, prefix, leaseTtlMs: 5000 });
    this.#loop = this.#claimLoop();
  }

  async #claimLoop(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const c = await this.#queue
        .claim("sim-worker", { blockMs: 200, signal: this.#stop.signal })
        .catch((err: unknown) => void this.unexpected.push(err));
      if (c === undefined) continue;
      const p = this.#drive(c)
        .catch((err: unknown) => void this.unexpected.push(err))
        .finally(() => this.#driving.delete(p));
      this.#driving.add(p);
    }
  }

  async #drive(c: Claim): Promise<void> {
    const base = { runId: c.runId, sessionId: c.sessionId, fence: c.lease.epoch };
    const append = async (...payloads: EventPayload[]): Promise<"ok" | "ended"> => {
      try {
        await Promise.all(payloads.map((payload) => this.#log.append({ ...base, payload })));
        return "ok";
      } catch (err) {
        if (isRunEnded(err)) return "ended";
        throw err;
      }
    };
    const events = await this.#log.read(c.runId, 0);
    const run = projectRun(
      c.runId,
      events.map((e) => e.event),
    );
    if (run.state === RunState.PAUSED && run.pendingApprovalId !== "")
      return this.#release(c, "paused");
    const start: EventPayload =
      run.state === RunState.QUEUED
        ? { case: "runStarted", value: create(RunStartedSchema, { workerId: "sim" }) }
        : { case: "runResumed", value: create(RunResumedSchema, { workerId: "sim" }) };
    try {
      await this.#log.append({ ...base, expectedSeq: events.length, payload: start });
    } catch (err) {
      if (isRunEnded(err)) return this.#release(c, "terminal");
      if (isAgentdError(err, "ECONFLICT")) return this.#release(c, "requeue");
      throw err;
    }
    const long = c.sessionId.startsWith("long-");
    for (let i = 0; i < (long ? 5000 : 2); i++) {
      if (await this.#cancelRequested(c.runId, events.length)) {
        await append({ case: "runCancelled", value: create(RunCancelledSchema, {}) });
        return this.#release(c, "terminal");
      }
      const callId = `c${i}-${ulid()}`;
      const r = await append(
        { case: "toolCall", value: create(ToolCallSchema, { callId, tool: "process.run" }) },
        { case: "toolResult", value: create(ToolResultSchema, { callId, ok: true }) },
      );
      if (r === "ended") return this.#release(c, "terminal");
      await sleep(2);
    }
    if (long) return this.#release(c, "terminal");
    const approvalId = `apr_${c.runId}_${ulid()}`;
    const r = await append(
      {
        case: "approvalRequested",
        value: create(ApprovalRequestedSchema, { approvalId, callId: "c", tool: "fs.write" }),
      },
      { case: "runPaused", value: create(RunPausedSchema, { reason: "approval", approvalId }) },
    );
    return this.#release(c, r === "ended" ? "terminal" : "paused");
  }

  async #cancelRequested(runId: string, after: number): Promise<boolean> {
    const evs = await this.#log.read(runId, after);
    return evs.some((e) => e.type === "run.cancel_requested");
  }

  async #release(c: Claim, outcome: "terminal" | "paused" | "requeue"): Promise<void> {
    await this.#queue.release(c, { outcome }).catch((err: unknown) => {
      if (!isLeaseLost(err)) throw err;
    });
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    await Promise.all(this.#driving);
    await this.#log.close();
    await this.#queue.close();
  }
}

// A fixture wait (bounded, generous for a loaded machine): it says what it waited for.
const waitFor = <T>(what: string, check: () => Promise<T | undefined>) =>
  until(what, check, { everyMs: 5 });

/** The run's log: exactly one terminal event, the last one; the chain verifies. */
async function assertEndedOnce(api: Api, runId: string): Promise<string> {
  const all = await api.deps.log.read(runId, 0);
  const ends = all.filter((e) => TERMINAL_TYPES.has(e.type));
  assert.equal(ends.length, 1, `one terminal event in ${all.map((e) => e.type).join(",")}`);
  assert.equal(all.at(-1)?.type, ends[0]?.type, "nothing after the terminal event");
  assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
  return ends[0]?.type as string;
}

async function failedPrecondition(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof ConnectError, String(err));
    assert.equal(err.code, Code.FailedPrecondition, err.message);
    assert.match(err.rawMessage, message);
    return true;
  });
}

before(async () => {
  redis = await startRedis({ appendfsync: "everysec" });
  dir = mkdtempSync(join(tmpdir(), "agentd-cancel-"));
});
after(async () => {
  assert.deepEqual(internalErrors, [], "no call failed with an internal error");
  for (const c of closers.reverse()) await c();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("CancelRun and approvals against a worker, from two API instances", () => {
  let one: Api;
  let two: Api;
  let worker: SimWorker;
  before(() => {
    one = startApi("race:", { cancelWaitMs: 10_000 });
    two = startApi("race:", { cancelWaitMs: 10_000 });
    worker = new SimWorker("race:");
  });
  after(async () => {
    await worker?.stop();
    assert.deepEqual(worker.unexpected, [], "the worker saw only EENDED/ECONFLICT");
  });

  const pausedOnApproval = async (): Promise<{ runId: string; approvalId: string }> => {
    const runId = await newRun(one, "pauses");
    const run = await waitFor("the run pauses on an approval", async () => {
      const r = (await one.rpc.getRun({ runId }, as("alice"))).run;
      return r?.state === RunState.PAUSED && r.pendingApprovalId !== "" ? r : undefined;
    });
    return { runId, approvalId: run.pendingApprovalId };
  };

  it("50 rounds of approve vs cancel: CANCELLED every time, nothing after the end", async () => {
    const outcomes = { approved: 0, refused: 0 };
    for (let round = 0; round < 50; round++) {
      const { runId, approvalId } = await pausedOnApproval();
      const [approver, canceller] = round % 2 === 0 ? [one, two] : [two, one];
      const [resolved, cancelled] = await Promise.allSettled([
        approver.rpc.resolveApproval(
          { approvalId, decision: ApprovalDecision.APPROVE },
          as("alice"),
        ),
        canceller.rpc.cancelRun({ runId, reason: `round ${round}` }, as("bob")),
      ]);
      assert.equal(
        cancelled.status,
        "fulfilled",
        String((cancelled as { reason?: unknown }).reason),
      );
      assert.equal(cancelled.value.run?.state, RunState.CANCELLED, `round ${round}`);
      if (resolved.status === "fulfilled") outcomes.approved++;
      else {
        outcomes.refused++;
        const err = resolved.reason as ConnectError;
        assert.equal(err.code, Code.FailedPrecondition, `round ${round}: ${err.message}`);
        assert.match(err.rawMessage, /already ended \(run\.cancelled\)/);
      }
      assert.equal(await assertEndedOnce(one, runId), "run.cancelled");
      await failedPrecondition(
        approver.rpc.resolveApproval({ approvalId, decision: ApprovalDecision.DENY }, as("alice")),
        new RegExp(
          `${approvalId} can no longer be resolved: run ${runId} already ended \\(run\\.cancelled\\)`,
        ),
      );
      const listed = await two.rpc.listApprovals({ runId }, as("alice"));
      assert.deepEqual(listed.approvals, [], "an ended run's approval is not listed");
    }
    const tenantWide = await one.rpc.listApprovals({ pageSize: 500 }, as("alice"));
    assert.deepEqual(tenantWide.approvals, [], "every run ended: nothing pending");
    // Both interleavings happened (else the test raced nothing).
    assert.ok(outcomes.approved > 0 && outcomes.refused > 0, JSON.stringify(outcomes));
  });

  it("50 rounds of cancel vs cancel, on paused and on running runs: both CANCELLED", async () => {
    for (let round = 0; round < 50; round++) {
      let runId: string;
      if (round % 2 === 0) runId = (await pausedOnApproval()).runId;
      else {
        runId = await newRun(two, "long");
        await waitFor("the run is running", async () => {
          const r = (await two.rpc.getRun({ runId }, as("bob"))).run;
          return r?.state === RunState.RUNNING ? r : undefined;
        });
      }
      const answers = await Promise.all([
        one.rpc.cancelRun({ runId, reason: "a" }, as("alice")),
        two.rpc.cancelRun({ runId, reason: "b" }, as("bob")),
      ]);
      for (const a of answers) assert.equal(a.run?.state, RunState.CANCELLED, `round ${round}`);
      assert.equal(await assertEndedOnce(two, runId), "run.cancelled");
      // A third cancel of the ended run answers it as it is.
      const again = await one.rpc.cancelRun({ runId }, as("alice"));
      assert.equal(again.run?.state, RunState.CANCELLED);
    }
  });

  it("a run that completed is answered COMPLETED, not FAILED_PRECONDITION", async () => {
    const runId = await newRun(one, "long");
    await waitFor("running", async () =>
      (await one.deps.log.read(runId, 0)).some((e) => e.type === "run.started") ? true : undefined,
    );
    // Its owner ends it first (the simulated worker's next append then gets EENDED).
    await one.deps.log.append({
      runId,
      sessionId: `long-${runId}`,
      payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "done" }) },
    });
    const { run } = await two.rpc.cancelRun({ runId }, as("bob"));
    assert.equal(run?.state, RunState.COMPLETED);
    assert.equal(await assertEndedOnce(one, runId), "run.completed");
  });
});

describe("CancelRun of a running run whose owner does not answer", () => {
  it("waits up to the server's limit, then answers RUNNING with cancel_requested", async () => {
    const api = startApi("wait1:", { cancelWaitMs: 300 });
    const runId = await newRun(api, "long");
    await api.deps.log.append({
      runId,
      sessionId: `long-${runId}`,
      payload: { case: "runStarted", value: create(RunStartedSchema, { workerId: "gone" }) },
    });
    const t0 = Date.now();
    const first = (await api.rpc.cancelRun({ runId, reason: "stop" }, as("alice"))).run as Run;
    assert.ok(Date.now() - t0 >= 250, "it waited for the owner");
    assert.equal(first.state, RunState.RUNNING);
    assert.equal(first.cancelRequested, true);
    const second = (await api.rpc.cancelRun({ runId }, as("bob"))).run as Run;
    assert.equal(second.cancelRequested, true);
    const types = (await api.deps.log.read(runId, 0)).map((e) => e.type);
    assert.deepEqual(
      types,
      ["run.queued", "run.started", "run.cancel_requested"],
      "requested once",
    );
    assert.equal((await api.rpc.getRun({ runId }, as("alice"))).run?.cancelRequested, true);
  });

  it("with no wait allowed (0), answers at once: RUNNING, cancel_requested", async () => {
    const api = startApi("wait0:", { cancelWaitMs: 0 });
    const runId = await newRun(api, "long");
    await api.deps.log.append({
      runId,
      sessionId: `long-${runId}`,
      payload: { case: "runStarted", value: create(RunStartedSchema, { workerId: "gone" }) },
    });
    const { run } = await api.rpc.cancelRun({ runId }, as("alice"));
    assert.equal(run?.state, RunState.RUNNING);
    assert.equal(run?.cancelRequested, true, "the answer shows the request it recorded");
    assert.equal(run?.lastSeq, 3n);
  });

  it("the client's deadline bounds the wait: an answer, not DEADLINE_EXCEEDED", async () => {
    const api = startApi("wait2:", { cancelWaitMs: 30_000 });
    const runId = await newRun(api, "long");
    await api.deps.log.append({
      runId,
      sessionId: `long-${runId}`,
      payload: { case: "runStarted", value: create(RunStartedSchema, { workerId: "gone" }) },
    });
    // The server would wait 30 s; the client allows 5: an answer at all (not the client's
    // DEADLINE_EXCEEDED) is the client's deadline bounding the wait.
    const { run } = await api.rpc.cancelRun({ runId }, as("alice", 5000));
    assert.equal(run?.state, RunState.RUNNING);
    assert.equal(run?.cancelRequested, true);
    // The owner ends it later; the next CancelRun answers CANCELLED at once.
    await api.deps.log.append({
      runId,
      sessionId: `long-${runId}`,
      payload: { case: "runCancelled", value: create(RunCancelledSchema, {}) },
    });
    const again = await api.rpc.cancelRun({ runId }, as("alice", 1500));
    assert.equal(again.run?.state, RunState.CANCELLED);
  });
});

it("a server limit a timer cannot express is refused at start, naming the option", () => {
  for (const cancelWaitMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
    assert.throws(
      () => cancelRunHandler({ ...startApi("bad:").deps, cancelWaitMs }),
      (err) => isAgentdError(err, "EVALIDATION") && err.field === "cancelWaitMs",
    );
  }
  assert.equal(typeof cancelRunHandler({ ...startApi("ok:").deps, cancelWaitMs: 0 }), "function");
});

describe("approvals of ended runs", () => {
  it("the expiry sweep racing CancelRun never appends after the end and reports no error", async () => {
    const api = startApi("sweep:");
    const runs: { runId: string; sessionId: string }[] = [];
    for (let i = 0; i < 20; i++) {
      const runId = await newRun(api, "pauses");
      const sessionId = `pauses-${runId}`;
      const claim = await api.deps.queue?.claim("w", { blockMs: 2000 });
      assert.ok(claim);
      assert.equal(claim.runId, runId);
      const approvalId = `apr_${runId}_${ulid()}`;
      const base = { runId, sessionId, fence: claim.lease.epoch };
      await Promise.all([
        api.deps.log.append({
          ...base,
          payload: { case: "runStarted", value: create(RunStartedSchema, {}) },
        }),
        api.deps.log.append({
          ...base,
          payload: {
            case: "approvalRequested",
            value: create(ApprovalRequestedSchema, {
              approvalId,
              expiresAt: timestampFromMs(Date.now() - 1000),
            }),
          },
        }),
        api.deps.log.append({
          ...base,
          payload: { case: "runPaused", value: create(RunPausedSchema, { approvalId }) },
        }),
      ]);
      await api.deps.queue?.release(claim, { outcome: "paused" });
      runs.push({ runId, sessionId });
    }
    const errors: unknown[] = [];
    const [swept] = await Promise.all([
      sweepPausedRuns(api.deps, { onError: (_, err) => errors.push(err) }),
      ...runs.map((r) => api.rpc.cancelRun({ runId: r.runId }, as("alice"))),
    ]);
    assert.deepEqual(errors, [], "EENDED is no error for the sweep");
    for (const r of runs) {
      assert.equal(await assertEndedOnce(api, r.runId), "run.cancelled");
      assert.notEqual(await api.deps.queue?.stateOf(r.runId), "paused");
    }
    assert.ok(swept.denied + swept.dropped <= runs.length);
  });
});
