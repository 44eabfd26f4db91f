/**
 * CreateRun when its one-step admission fails, through the in-process router on a real
 * Redis: a failure after the run was stored (the answer lost) still answers the run, and a
 * retry with the key gets that same run; a failure before anything was stored releases the
 * key at once, so the retry creates the run without waiting for the claim to go stale.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type Interceptor,
} from "@connectrpc/connect";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { AgentdError } from "../errors.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { RedisIdempotencyStore } from "../idempotency/redis-idempotency.ts";
import { RunProjectionCache } from "../projections/run-cache.ts";
import type { RunAdmission } from "../scheduler/admission.ts";
import { RedisRunAdmission } from "../scheduler/redis-run-admission.ts";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { kPrincipal } from "./context.ts";
import { errorInterceptor } from "./interceptors/errors.ts";
import { registerRunService } from "./routes.ts";

let redis: TestRedis;
let dir: string;
before(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), "agentd-admit-run-"));
});
after(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const principal: Interceptor = (next) => async (req) => {
  req.contextValues.set(kPrincipal, {
    name: "alice",
    tenantId: "acme",
    roles: new Set(["submit", "read"] as const),
  });
  return next(req);
};

/** An API whose admission is the real one, wrapped by `wrap` (the fault). */
function api(wrap: (real: RunAdmission) => RunAdmission) {
  const client = redis.client();
  const prefix = `t:${ulid()}:`;
  const log = new RedisEventLog({ client, prefix });
  const queue = new RedisRunQueue({ client, prefix });
  const deps = {
    log,
    runs: new RunProjectionCache({ log }),
    artifacts: new FsArtifactStore(join(dir, prefix)),
    queue,
    idempotency: new RedisIdempotencyStore({ client, prefix }),
    admission: wrap(new RedisRunAdmission({ client, prefix })),
  };
  const transport = createRouterTransport((r) => registerRunService(r, deps), {
    router: { interceptors: [errorInterceptor(() => undefined), principal] },
  });
  return { rpc: createClient(RunService, transport), log, queue };
}

const lostAnswer = new AgentdError("EUNAVAILABLE", "the event log (Redis) did not answer in time");

it("the admission ran but its answer was lost: CreateRun answers the stored run; the retry gets it too", async () => {
  const { rpc, queue } = api((real) => ({
    admit: async (req) => {
      await real.admit(req);
      throw lostAnswer;
    },
  }));
  const req = { prompt: "p", idempotencyKey: `k-${ulid()}` };
  const first = await rpc.createRun(req);
  const runId = first.run?.runId as string;
  assert.ok(runId, "answered with the run");
  assert.equal(await queue.stateOf(runId), "ready");
  const again = await rpc.createRun(req);
  assert.equal(again.run?.runId, runId, "the key names that run");
});

it("the admission failed before storing anything: UNAVAILABLE, the key is released, the retry creates the run", async () => {
  let fail = true;
  const { rpc, log, queue } = api((real) => ({
    admit: async (req) => {
      if (fail) throw lostAnswer;
      return real.admit(req);
    },
  }));
  const req = { prompt: "p", idempotencyKey: `k-${ulid()}` };
  await assert.rejects(
    rpc.createRun(req),
    (e: unknown) => ConnectError.from(e).code === Code.Unavailable,
  );
  fail = false;
  // At once: no stale claim stands in the way (it would answer UNAVAILABLE for 30 s).
  const { run } = await rpc.createRun(req);
  const runId = run?.runId as string;
  assert.equal((await log.head(runId))?.seq, 1);
  assert.equal(await queue.stateOf(runId), "ready");
});
