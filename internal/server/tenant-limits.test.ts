/**
 * Per-tenant concurrentRuns against real processes: a private redis-server, a server with an
 * auth file naming tenants, two workers (2 slots each), real sandboxes and a stub model that
 * holds chosen runs until the test lets them go. Tenant "acme" may run 1 run at once:
 * its second run stays QUEUED with held_by "tenant.concurrentRuns" while 3 worker slots are
 * free, the other tenant's runs go by, the held run starts when the first ends (also after
 * the worker holding the first was SIGKILLed), never two of acme's runs at once across both
 * workers; a reload of the auth file that raises the limit releases a held run, one that
 * removes the tenant falls back to --tenant-limit; the limit gauges follow the file (read at
 * /metrics/tenants with an admin token). artifactBytes: a tenant storing more than its limit
 * has its run's next artifact write fail the run naming the limit; DeleteRun gives it back.
 */
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { type Run, RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { sha256Hex } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { tarOf } from "../testing/tar.ts";
import { tenantMetric } from "../testing/tenant-metrics.ts";

const ACME = "acme-token-0123456789";
const OTHER = "other-token-0123456789";
const THRIFTY = "thrifty-token-0123456789";
const BURSTY = "bursty-token-0123456789";
const ADMIN = "admin-token-0123456789";
const HOARDER = "hoarder-token-0123456789";
/** thrifty's tokens a day: one tool-call step (28 tokens, the stub's usage) spends it. */
const THRIFTY_TOKENS = 25;

/** The auth file: two tenants' tokens, and `acme:` with the given concurrentRuns (or none). */
function authYaml(acmeLimit: number | undefined): string {
  const tokens = [
    [ACME, "acme"],
    [OTHER, "other"],
    [THRIFTY, "thrifty"],
    [BURSTY, "bursty"],
    [HOARDER, "hoarder"],
  ]
    .map(
      ([t, tenant]) =>
        `  - sha256: ${sha256Hex(t as string)}\n    tenant: ${tenant}\n    roles: [submit, read]\n`,
    )
    .join("");
  // The operator's admin token: it reads the per-tenant series (/metrics/tenants).
  const admin = `  - sha256: ${sha256Hex(ADMIN)}\n    tenant: ops\n    roles: [admin]\n`;
  const acme =
    acmeLimit === undefined ? "" : `  acme:\n    limits:\n      concurrentRuns: ${acmeLimit}\n`;
  const tenants = `tenants:\n${acme}  other:\n    retention: 7d\n  thrifty:\n    limits:\n      tokensPerDay: ${THRIFTY_TOKENS}\n  bursty:\n    limits:\n      runsPerMinute: 2\n      uploadBytes: 64KiB\n  hoarder:\n    limits:\n      artifactBytes: 1KiB\n`;
  return `tokens:\n${tokens}${admin}${tenants}`;
}

/** Runs whose prompt says "gate-X" wait in their model request until release("X"). */
const gates = new Map<string, { open: Promise<void>; release: () => void }>();
function gate(name: string) {
  let g = gates.get(name);
  if (g === undefined) {
    let release: () => void = () => undefined;
    const open = new Promise<void>((r) => {
      release = r;
    });
    g = { open, release };
    gates.set(name, g);
  }
  return g;
}
/**
 * acme's runs with a model request in flight now (by gate name: a run taken over from a
 * killed worker asks again while its first request still waits), and the most at once.
 */
const acmeInFlight = new Map<string, number>();
let acmeMaxRuns = 0;

async function model(req: StubRequest): Promise<StubReply> {
  const text = JSON.stringify(req.body?.messages ?? []);
  const name = /gate-([a-z0-9]+)/.exec(text)?.[1];
  const acme = text.includes("acme-run") && name !== undefined;
  if (acme) {
    acmeInFlight.set(name, (acmeInFlight.get(name) ?? 0) + 1);
    acmeMaxRuns = Math.max(acmeMaxRuns, acmeInFlight.size);
  }
  try {
    if (name !== undefined) await gate(name).open;
    // thrifty's runs call a tool first (a second step follows), then end.
    const tools = (req.body?.messages ?? []).filter((m: { role: string }) => m.role === "tool");
    // hoarder's run edits its file: the run's end stores a patch (an artifact write).
    if (text.includes("hoarder-run") && tools.length === 0)
      return {
        chunks: toolCallsReply([
          {
            id: "call_1",
            name: "repo_patch",
            arguments: JSON.stringify({
              path: "a.txt",
              edits: [{ oldText: "hoard-me", newText: "hoarded" }],
            }),
          },
        ]),
      };
    if (text.includes("thrifty-run") && tools.length === 0)
      return {
        chunks: toolCallsReply([
          { id: "call_1", name: "process_run", arguments: JSON.stringify({ command: "echo hi" }) },
        ]),
      };
    return { chunks: textReply(["done"]) };
  } finally {
    if (acme) {
      const n = (acmeInFlight.get(name) ?? 1) - 1;
      if (n === 0) acmeInFlight.delete(name);
      else acmeInFlight.set(name, n);
    }
  }
}

let c: Cluster;

/** Replaces the auth file in one step (the server's watch never reads it half written). */
function writeAuth(text: string): void {
  writeFileSync(`${authFile}.tmp`, text);
  renameSync(`${authFile}.tmp`, authFile);
}
let dir: string;
let authFile: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-tenant-limits-"));
  authFile = join(dir, "auth.yaml");
  writeAuth(authYaml(1));
  c = await startCluster({
    workers: 2,
    concurrency: 2,
    script: model,
    serverFlags: ["--auth-file", authFile, "--tenant-limit", "3"],
  });
});
after(async () => {
  for (const g of gates.values()) g.release();
  await c?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 180_000) {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what} (${String(last)})\n${c.diagnostics()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function submit(token: string, prompt: string): Promise<string> {
  const workspaceTar = await tarOf([{ name: "a.txt", data: "a\n" }]);
  const { run } = await c.client.createRun({ prompt, workspaceTar }, token);
  assert.ok(run !== undefined);
  c.track(run.runId);
  return run.runId;
}

const get = async (token: string, runId: string): Promise<Run> =>
  (await c.client.getRun(runId, token)).run as Run;

const inState = (token: string, runId: string, state: RunState) =>
  until(`run ${runId} in state ${RunState[state]}`, async () => {
    const r = await get(token, runId);
    return r.state === state ? r : undefined;
  });

const metric = (name: string, tenant: string, limit = "concurrentRuns") =>
  tenantMetric(c.server.url, ADMIN, name, tenant, limit);

/** The worker that started the run last (its run.started). */
async function ownerOf(runId: string): Promise<string> {
  const entries = await c.log.read(runId, 0, 1000);
  const started = entries
    .map((e) => e.event.payload)
    .filter((p) => p.case === "runStarted")
    .at(-1);
  assert.ok(started?.case === "runStarted", "the run has started");
  return started.value.workerId;
}

it("concurrentRuns 1: the second run is held (and says so) until the first ends, across two workers, a SIGKILL and reloads", {
  timeout: 900_000,
}, async () => {
  // Series of the named tenants exist from the start: acme's own limit, other's the server's.
  assert.equal(await metric("agentd_tenant_limit", "acme"), 1);
  assert.equal(await metric("agentd_tenant_limit", "other"), 3);
  assert.equal(await metric("agentd_tenant_limit_used", "acme"), 0);

  const a1 = await submit(ACME, "acme-run gate-a1");
  await inState(ACME, a1, RunState.RUNNING);
  const a2 = await submit(ACME, "acme-run gate-a2");
  // 3 worker slots are free, yet a2 stays queued: the tenant's limit holds it.
  const held = await until("a2 held by tenant.concurrentRuns", async () => {
    const r = await get(ACME, a2);
    return r.heldBy === "tenant.concurrentRuns" ? r : undefined;
  });
  assert.equal(held.state, RunState.QUEUED);
  assert.match(held.heldMessage, /tenants\.acme\.limits\.concurrentRuns/);
  const listed = (await c.client.listRuns({}, ACME)).runs.find((r) => r.runId === a2);
  assert.equal(listed?.heldBy, "tenant.concurrentRuns", "ListRuns says it too");
  // (Scrapes within 500 ms share one refresh: wait for the next.)
  await until("acme's concurrentRuns use at 1 in the gauge", async () =>
    (await metric("agentd_tenant_limit_used", "acme")) === 1 ? true : undefined,
  );

  // The other tenant is not held: its runs start and end while a2 waits.
  const o1 = await submit(OTHER, "other-run one");
  const o2 = await submit(OTHER, "other-run two");
  await inState(OTHER, o1, RunState.COMPLETED);
  await inState(OTHER, o2, RunState.COMPLETED);
  const still = await get(ACME, a2);
  assert.equal(still.state, RunState.QUEUED, "a2 still held after other's runs came and went");
  assert.equal(still.heldBy, "tenant.concurrentRuns");

  // The worker driving a1 dies: a1 is taken over by the other one (its slot with it), and
  // when a1 ends its slot comes back: a2 starts.
  const owner = c.workerOf(await ownerOf(a1));
  assert.ok(owner !== undefined, "a1's worker is one of ours");
  await owner.kill();
  const survivor = c.workers.find((w) => w !== owner);
  assert.ok(survivor !== undefined);
  gate("a1").release();
  await inState(ACME, a1, RunState.COMPLETED);
  const a2run = await inState(ACME, a2, RunState.RUNNING);
  assert.equal(a2run.heldBy, "", "a running run is held by nothing");

  assert.equal(acmeMaxRuns, 1, "never two of acme's runs at once under concurrentRuns 1");

  // A reload that raises the limit releases a held run at once.
  const a3 = await submit(ACME, "acme-run gate-a3");
  await until("a3 held", async () =>
    (await get(ACME, a3)).heldBy === "tenant.concurrentRuns" ? true : undefined,
  );
  writeAuth(authYaml(2));
  process.kill(c.server.pid, "SIGHUP");
  await inState(ACME, a3, RunState.RUNNING);
  await until("the acme limit gauge at 2", async () =>
    (await metric("agentd_tenant_limit", "acme")) === 2 ? true : undefined,
  );
  await until("acme's concurrentRuns use at 2 in the gauge", async () =>
    (await metric("agentd_tenant_limit_used", "acme")) === 2 ? true : undefined,
  );

  // Lowered to 1 while 2 run: both go on, a new run is held.
  writeAuth(authYaml(1));
  process.kill(c.server.pid, "SIGHUP");
  await until("the acme limit gauge back at 1", async () =>
    (await metric("agentd_tenant_limit", "acme")) === 1 ? true : undefined,
  );
  const a4 = await submit(ACME, "acme-run gate-a4");
  await until("a4 held under the lowered limit", async () =>
    (await get(ACME, a4)).heldBy === "tenant.concurrentRuns" ? true : undefined,
  );
  assert.equal((await get(ACME, a2)).state, RunState.RUNNING, "a lowered limit stops nobody");

  // acme removed from the tenants: map: the server's limit (3) applies, a4 is admitted.
  writeAuth(authYaml(undefined));
  process.kill(c.server.pid, "SIGHUP");
  // (The one live worker's 2 slots run a2 and a3: a4 is admitted, waiting for a slot.)
  await until("a4 no longer held by a tenant limit", async () => {
    const r = await get(ACME, a4);
    return r.heldBy === "" ? r : undefined;
  });
  // acme's tokens still name it: its series stay, at the server's limit.
  await until("acme's limit gauge at the server's --tenant-limit (3)", async () =>
    (await metric("agentd_tenant_limit", "acme")) === 3 ? true : undefined,
  );
  for (const g of ["a2", "a3", "a4"]) gate(g).release();
  for (const r of [a2, a3, a4]) await inState(ACME, r, RunState.COMPLETED);
  assert.equal(await metric("agentd_tenant_limit", "nobody"), undefined, "no unnamed tenant");
});

it("tokensPerDay spent: the running run's next model request fails naming the tenant limit, a new run is refused with RetryInfo, across a Redis restart; other tenants go on", {
  timeout: 600_000,
}, async () => {
  assert.equal(await metric("agentd_tenant_limit", "thrifty", "tokensPerDay"), THRIFTY_TOKENS);
  const t1 = await submit(THRIFTY, "thrifty-run one");
  const failed = await inState(THRIFTY, t1, RunState.FAILED);
  assert.equal(failed.error?.code, "ELIMIT_TOKENS");
  assert.match(failed.error?.message ?? "", /tenants\.thrifty\.limits\.tokensPerDay/);
  assert.match(failed.error?.message ?? "", /the model was not asked/);
  const used = await until("thrifty's day use in the gauge", async () => {
    const v = await metric("agentd_tenant_limit_used", "thrifty", "tokensPerDay");
    return v !== undefined && v > 0 ? v : undefined;
  });
  assert.ok(used >= THRIFTY_TOKENS, `the day's use ${used} reached the limit`);

  const refused = async () => {
    const err = await submit(THRIFTY, "thrifty-run two").then(
      () => assert.fail("CreateRun of a spent tenant must be refused"),
      (e: { code: number; details: string; metadata: { get(k: string): unknown[] } }) => e,
    );
    assert.equal(err.code, 8, "RESOURCE_EXHAUSTED");
    assert.match(err.details, /tokensPerDay/);
    const bin = err.metadata.get("grpc-status-details-bin");
    assert.equal(bin.length, 1, "google.rpc.Status details (RetryInfo) are attached");
  };
  await refused();
  // The day's count lives in Redis (AOF): a restart of Redis does not forget it.
  await c.redis.restart();
  await until("CreateRun refused after the Redis restart", async () => {
    await refused();
    return true;
  });
  // Another tenant is not affected.
  const o = await submit(OTHER, "other-run after thrifty");
  await inState(OTHER, o, RunState.COMPLETED);
});

it("runsPerMinute 2: a burst of CreateRuns is refused past it with RetryInfo naming the limit; the refused make no run", {
  timeout: 300_000,
}, async () => {
  // 5 creates span at most two minute windows: at most 4 fit, so one is refused.
  const made: string[] = [];
  const refusals: { code: number; details: string; metadata: { get(k: string): unknown[] } }[] = [];
  for (let i = 0; i < 5; i++) {
    await submit(BURSTY, `bursty-run ${i}`).then(
      (id) => made.push(id),
      (e) => refusals.push(e),
    );
  }
  assert.ok(refusals.length >= 1, "a create past runsPerMinute is refused");
  for (const e of refusals) {
    assert.equal(e.code, 8, "RESOURCE_EXHAUSTED");
    assert.match(e.details, /tenants\.bursty\.limits\.runsPerMinute/);
    assert.equal(e.metadata.get("grpc-status-details-bin").length, 1, "RetryInfo attached");
  }
  const listed = (await c.client.listRuns({}, BURSTY)).runs.map((r) => r.runId).sort();
  assert.deepEqual(listed, [...made].sort(), "only the admitted creates made runs");
  for (const r of made) await inState(BURSTY, r, RunState.COMPLETED);
});

it("uploadBytes 64KiB: a larger workspace, inline or streamed, is refused naming the tenant limit; another tenant's passes", {
  timeout: 300_000,
}, async () => {
  const big = await tarOf([{ name: "big.bin", data: "x".repeat(200 * 1024) }]);
  const inline = await c.client
    .createRun({ prompt: "bursty-run big", workspaceTar: big }, BURSTY)
    .then(
      () => assert.fail("an inline workspace over uploadBytes must be refused"),
      (e: { code: number; details: string }) => e,
    );
  assert.equal(inline.code, 8, "RESOURCE_EXHAUSTED");
  assert.match(inline.details, /tenants\.bursty\.limits\.uploadBytes/);
  const streamed = await c.client.uploadWorkspace([big], { auth: BURSTY }).then(
    () => assert.fail("a streamed workspace over uploadBytes must be refused"),
    (e: { code: number; details: string }) => e,
  );
  assert.equal(streamed.code, 8, "RESOURCE_EXHAUSTED");
  assert.match(streamed.details, /tenants\.bursty\.limits\.uploadBytes/);
  const ok = await c.client.uploadWorkspace([big], { auth: OTHER });
  assert.ok(ok.digest.length > 0, "the other tenant has no uploadBytes: the server's limit");
});

it("artifactBytes 1KiB: the tenant's stored bytes (its 4 KiB workspace) fail its run's next artifact write naming the limit; DeleteRun gives the bytes back", {
  timeout: 300_000,
}, async () => {
  assert.equal(await metric("agentd_tenant_limit", "hoarder", "artifactBytes"), 1024);
  assert.equal(await metric("agentd_tenant_limit_used", "hoarder", "artifactBytes"), 0);
  const workspaceTar = await tarOf([{ name: "a.txt", data: `hoard-me\n${"x".repeat(3000)}\n` }]);
  const { run } = await c.client.createRun({ prompt: "hoarder-run", workspaceTar }, HOARDER);
  assert.ok(run !== undefined);
  c.track(run.runId);
  const failed = await inState(HOARDER, run.runId, RunState.FAILED);
  assert.equal(failed.error?.code, "ELIMIT_ARTIFACTS", JSON.stringify(failed.error));
  assert.match(
    failed.error?.message ?? "",
    /^tenant limit artifactBytes: tenant hoarder stores \d+ of its 1024 /,
  );
  assert.match(failed.error?.message ?? "", /tenants\.hoarder\.limits\.artifactBytes/);
  const used = await until("hoarder's stored bytes in the gauge", async () => {
    const v = await metric("agentd_tenant_limit_used", "hoarder", "artifactBytes");
    return v !== undefined && v > 1024 ? v : undefined;
  });
  const queued = (await c.log.read(run.runId, 0, 10))[0]?.event.payload;
  assert.ok(queued?.case === "runQueued");
  assert.equal(used, Number(queued.value.workspaceSizeBytes), "the workspace, counted once");
  // Another tenant is not held by hoarder's bytes.
  const other = await submit(OTHER, "other-run artifact bytes");
  await inState(OTHER, other, RunState.COMPLETED);
  await c.client.unary(
    RunService.method.deleteRun,
    { runId: run.runId, reason: "free the bytes" },
    HOARDER,
  );
  await until("hoarder's stored bytes back to 0 after DeleteRun", async () =>
    (await metric("agentd_tenant_limit_used", "hoarder", "artifactBytes")) === 0 ? true : undefined,
  );
});
