/**
 * Integration tests of `agentd server` (real process, private Redis, grpc-js and curl
 * clients): bearer-token authentication, roles, tenant isolation, and ListRuns filters and
 * pagination.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import {
  appendEvents,
  curl,
  payload,
  type Stack,
  sleep,
  startStack,
  TOKENS,
} from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

describe("authentication and tenancy", { timeout: 180_000 }, () => {
  let acmeRun: Run;
  let globexRun: Run;

  before(async () => {
    acmeRun = (await stack.client.createRun({ prompt: "acme's secret plan" })).run as Run;
    globexRun = (await stack.client.createRun({ prompt: "globex's plan" }, TOKENS.globex))
      .run as Run;
    assert.equal(acmeRun.tenantId, "acme");
    assert.equal(globexRun.tenantId, "globex");
  });

  it("no token and a wrong token are UNAUTHENTICATED on every RPC", async () => {
    for (const auth of [null, "not-a-token-anyone-has"]) {
      await assertGrpcError(
        stack.client.createRun({ prompt: "x" }, auth),
        grpc.status.UNAUTHENTICATED,
      );
      await assertGrpcError(stack.client.getRun(acmeRun.runId, auth), grpc.status.UNAUTHENTICATED);
      await assertGrpcError(stack.client.listRuns({}, auth), grpc.status.UNAUTHENTICATED);
      const s = stack.client.streamEvents({ runId: acmeRun.runId }, auth);
      const end = await s.end();
      assert.equal(end.status.code, grpc.status.UNAUTHENTICATED);
      assert.equal(s.events.length, 0);
    }
  });

  it("SSE without a token or with a wrong one answers 401", async () => {
    const url = `${stack.server.url}/v1/runs/${acmeRun.runId}/events`;
    for (const headers of [[], ["-H", "Authorization: Bearer not-a-token-anyone-has"]]) {
      const res = await curl([...headers, url]);
      assert.equal(res.status, 401);
      assert.equal((JSON.parse(res.body) as { code: string }).code, "unauthenticated");
      assert.doesNotMatch(res.body, /secret plan/);
    }
  });

  it("WhoAmI answers the token's tenant, name and roles (any valid token), never without one", async () => {
    const who = (token: string | null) =>
      curl([
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        ...(token === null ? [] : ["-H", `authorization: Bearer ${token}`]),
        "--data",
        "{}",
        `${stack.server.url}/agentd.v1.RunService/WhoAmI`,
      ]);
    const all = await who(TOKENS.acme);
    assert.equal(all.status, 200, all.body);
    assert.deepEqual(JSON.parse(all.body).roles, ["admin", "approve", "read", "submit"]);
    assert.equal(JSON.parse(all.body).tenantId, "acme");
    const reader = JSON.parse((await who(TOKENS.acmeReader)).body) as { roles: string[] };
    assert.deepEqual(reader.roles, ["read"]);
    assert.doesNotMatch(JSON.stringify(reader), new RegExp(TOKENS.acmeReader));
    assert.equal((await who(null)).status, 401);
    assert.equal((await who("nobody-has-this")).status, 401);
  });

  it("a read-only token reads but cannot create or cancel runs (PERMISSION_DENIED)", async () => {
    const { run } = await stack.client.getRun(acmeRun.runId, TOKENS.acmeReader);
    assert.equal(run?.runId, acmeRun.runId);
    await assertGrpcError(
      stack.client.createRun({ prompt: "x" }, TOKENS.acmeReader),
      grpc.status.PERMISSION_DENIED,
      /submit/,
    );
    await assertGrpcError(
      stack.client.cancelRun(acmeRun.runId, "no", TOKENS.acmeReader),
      grpc.status.PERMISSION_DENIED,
    );
  });

  it("another tenant's run is NOT_FOUND for GetRun, StreamEvents, CancelRun and SSE", async () => {
    const asGlobex = TOKENS.globex;
    await assertGrpcError(stack.client.getRun(acmeRun.runId, asGlobex), grpc.status.NOT_FOUND);
    const s = stack.client.streamEvents({ runId: acmeRun.runId }, asGlobex);
    const end = await s.end();
    assert.equal(end.status.code, grpc.status.NOT_FOUND);
    assert.equal(s.events.length, 0);
    await assertGrpcError(
      stack.client.cancelRun(acmeRun.runId, "mine now", asGlobex),
      grpc.status.NOT_FOUND,
    );
    const sse = await curl([
      "-H",
      `Authorization: Bearer ${asGlobex}`,
      `${stack.server.url}/v1/runs/${acmeRun.runId}/events`,
    ]);
    assert.equal(sse.status, 404);
    assert.doesNotMatch(sse.body, /secret plan/);
    // The failed cancel left acme's run alone.
    const { run } = await stack.client.getRun(acmeRun.runId);
    assert.equal(run?.state, RunState.QUEUED);
  });

  it("ListRuns of globex holds globex's runs and none of acme's", async () => {
    const globex = await stack.client.listRuns({ pageSize: 500 }, TOKENS.globex);
    const ids = globex.runs.map((r) => r.runId);
    assert.ok(ids.includes(globexRun.runId));
    assert.ok(!ids.includes(acmeRun.runId));
    assert.ok(globex.runs.every((r) => r.tenantId === "globex"));
    const acme = await stack.client.listRuns({ pageSize: 500 });
    assert.ok(acme.runs.map((r) => r.runId).includes(acmeRun.runId));
    assert.ok(!acme.runs.map((r) => r.runId).includes(globexRun.runId));
  });

  it("Health Check answers without a token", async () => {
    const anon = new GrpcRunClient(stack.server.addr);
    try {
      const res = await anon.healthCheck("");
      assert.equal(res.status, HealthCheckResponse_ServingStatus.SERVING);
      assert.equal(
        (await anon.healthCheck("agentd.v1.RunService")).status,
        HealthCheckResponse_ServingStatus.SERVING,
      );
    } finally {
      anon.close();
    }
  });
});

describe("ListRuns", { timeout: 180_000 }, () => {
  const as = TOKENS.initech; // this tenant's runs are all made here
  /** Run ids in creation order. */
  const created: Run[] = [];
  const ids = (runs: readonly Run[]): string[] => runs.map((r) => r.runId);
  const newestFirst = (runs: readonly Run[]): string[] => ids(runs).reverse();
  let cancelled: Run[];
  let completed: Run[];
  let queued: Run[];

  before(async () => {
    // 9 runs: sessions s-one (5) and s-two (4); 2 cancelled, 1 completed, the rest queued.
    for (let i = 0; i < 9; i++) {
      const { run } = await stack.client.createRun(
        { prompt: `job ${i}`, sessionId: i % 2 === 0 ? "s-one" : "s-two" },
        as,
      );
      assert.ok(run);
      created.push(run);
      await sleep(2); // distinct ULID milliseconds: creation order is id order
    }
    cancelled = [created[1], created[6]] as Run[];
    for (const r of cancelled) await stack.client.cancelRun(r.runId, "not needed", as);
    completed = [created[4]] as Run[];
    await appendEvents(stack.log, created[4] as Run, [payload.started(), payload.completed()]);
    queued = created.filter((r) => !cancelled.includes(r) && !completed.includes(r));
  });

  /** Every run of a query, page by page; asserts each page is at most `pageSize`. */
  async function all(query: { state?: RunState; sessionId?: string }, pageSize: number) {
    const runs: Run[] = [];
    let pageToken = "";
    for (let pages = 0; pages < 50; pages++) {
      const res = await stack.client.listRuns({ ...query, pageSize, pageToken }, as);
      assert.ok(res.runs.length <= pageSize);
      runs.push(...res.runs);
      if (res.nextPageToken === "") return runs;
      pageToken = res.nextPageToken;
    }
    throw new Error("ListRuns did not end in 50 pages");
  }

  it("lists every run newest first in one page", async () => {
    const res = await stack.client.listRuns({}, as);
    assert.deepEqual(ids(res.runs), newestFirst(created));
    assert.equal(res.nextPageToken, "");
  });

  it("pages with page_token: every run exactly once, newest first", async () => {
    for (const size of [1, 2, 4]) {
      assert.deepEqual(ids(await all({}, size)), newestFirst(created), `page_size ${size}`);
    }
  });

  it("filters by state", async () => {
    const byState = async (state: RunState, size = 50) => ids(await all({ state }, size));
    assert.deepEqual(await byState(RunState.CANCELLED), newestFirst(cancelled));
    assert.deepEqual(await byState(RunState.COMPLETED), newestFirst(completed));
    assert.deepEqual(await byState(RunState.QUEUED), newestFirst(queued));
    assert.deepEqual(await byState(RunState.QUEUED, 2), newestFirst(queued));
    assert.deepEqual(await byState(RunState.CANCELLED, 1), newestFirst(cancelled));
    assert.deepEqual(await byState(RunState.RUNNING), []);
  });

  it("filters by session, and by session and state together", async () => {
    const one = created.filter((r) => r.sessionId === "s-one");
    const two = created.filter((r) => r.sessionId === "s-two");
    assert.equal(one.length, 5);
    assert.deepEqual(ids(await all({ sessionId: "s-one" }, 2)), newestFirst(one));
    assert.deepEqual(ids(await all({ sessionId: "s-two" }, 50)), newestFirst(two));
    assert.deepEqual(
      ids(await all({ sessionId: "s-two", state: RunState.CANCELLED }, 1)),
      newestFirst(cancelled.filter((r) => r.sessionId === "s-two")),
    );
    assert.deepEqual(ids(await all({ sessionId: "s-nobody" }, 50)), []);
  });

  it("a garbage page_token, or one of another query, is INVALID_ARGUMENT", async () => {
    for (const pageToken of ["garbage!!", "bm90IGpzb24", "bnVsbA", "%%%"]) {
      await assertGrpcError(
        stack.client.listRuns({ pageToken }, as),
        grpc.status.INVALID_ARGUMENT,
        /page_token/,
      );
    }
    const first = await stack.client.listRuns({ pageSize: 2 }, as);
    assert.notEqual(first.nextPageToken, "");
    await assertGrpcError(
      stack.client.listRuns(
        { pageSize: 2, pageToken: first.nextPageToken, state: RunState.QUEUED },
        as,
      ),
      grpc.status.INVALID_ARGUMENT,
      /page_token/,
    );
  });
});
