/**
 * Event export against real processes: a private Redis, an API server, and two more
 * `agentd server --export-config` processes sharing a webhook sink (a receiver that checks
 * every signature) and an OTLP logs sink (an OTLP/HTTP receiver). Exactly one of them
 * delivers at a time; a sink answering 500 or hanging is dead-lettered while the delivering
 * servers go on answering the API; the deliverer SIGKILLed and a full restart lose nothing
 * (each event at least once). No assertion here is on how long anything took.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { appendEvents, deltas, type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../testing/otlp-receiver.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../testing/webhook-receiver.ts";
import { RedisExportState } from "./redis-export-state.ts";

const KEY = "test-hook-key-0123456789abcdef";
const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const LEASE_TTL_MS = 1500;

let stack: Stack;
let hook: WebhookReceiver;
let otlp: OtlpReceiver;
let configFile: string;
const exporters: AgentdProcess[] = [];
let poison = "";
let hang = "";

before(async () => {
  stack = await startStack();
  hook = await startWebhookReceiver(Buffer.from(KEY), (d) =>
    d.runId === poison ? 500 : d.runId === hang ? "hang" : 200,
  );
  otlp = await startOtlpReceiver();
  configFile = join(stack.dir, "export.yaml");
  writeFileSync(
    configFile,
    [
      `leaseTtlMs: ${LEASE_TTL_MS}`,
      "sinks:",
      "  - name: hook",
      "    type: webhook",
      `    url: ${hook.url}`,
      "    secret: $ENV.AGENTD_TEST_HOOK_KEY",
      "    tenants: [acme]",
      "    start: oldest",
      "    maxAttempts: 3",
      "    timeoutMs: 400",
      "    backoff: {initialMs: 20, maxMs: 100}",
      "  - name: otel",
      "    type: otlp-logs",
      `    endpoint: ${otlp.url}/v1/logs`,
      "    tenants: [acme]",
      "    types: [run.queued, output.delta]",
      "    start: oldest",
    ].join("\n"),
  );
  exporters.push(await startExporter(), await startExporter());
});

after(async () => {
  await Promise.allSettled(exporters.map((p) => p.kill()));
  await stack?.stop();
  await hook?.close();
  await otlp?.close();
});

function startExporter(): Promise<AgentdProcess> {
  return startAgentd(
    "server",
    [...stack.flags, "--listen", "127.0.0.1:0", "--export-config", configFile],
    { env: { AGENTD_TEST_HOOK_KEY: KEY } },
  );
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  ms = 120_000, // generous: a loaded machine never fails it, only a delivery that never comes
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline)
      throw new Error(
        `timed out waiting for ${what}\n${exporters.map((p) => p.output().slice(-2000)).join("\n---\n")}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function eventIds(run: Run): Promise<string[]> {
  return (await stack.log.read(run.runId, 0)).map((e) => e.event.eventId);
}

async function allAccepted(run: Run): Promise<string[]> {
  const ids = await eventIds(run);
  await until(`all ${ids.length} events of ${run.runId} delivered`, () =>
    ids.every((id) => (hook.accepted.get(id) ?? 0) >= 1),
  );
  return ids;
}

const state = () => new RedisExportState(stack.redis.client(), "agentd:");
const leader = async (): Promise<AgentdProcess | undefined> => {
  const holder = await stack.redis.client().get("agentd:export:hook:lease");
  const pid = Number(holder?.split(":")[1]);
  return exporters.find((p) => p.pid === pid);
};

let a: Run;

it("every event of the sink's tenant arrives signed, once, from exactly one deliverer", async () => {
  const created = await stack.client.createRun({ prompt: "export me" }, TOKENS.acme, {
    traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01`,
  });
  a = created.run as Run;
  const other = (await stack.client.createRun({ prompt: "not exported" }, TOKENS.globex))
    .run as Run;
  await Promise.all([
    appendEvents(stack.log, a, deltas(10, "a")),
    appendEvents(stack.log, other, deltas(5, "g")),
  ]);
  const ids = await allAccepted(a);
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(
    hook.deliveries.every((d) => d.signed),
    "every delivery verifies",
  );
  assert.ok(!hook.deliveries.some((d) => d.runId === other.runId), "globex is not this sink's");
  for (const id of ids) assert.equal(hook.accepted.get(id), 1, "two servers, one delivery each");
  const body = JSON.parse(hook.deliveries[0]?.body ?? "{}") as { type?: string; hash?: string };
  assert.equal(body.type, "run.queued");
  assert.match(body.hash ?? "", /^[0-9a-f]{64}$/, "the body is the stored event with its hash");
  assert.ok(await leader(), "one of the exporters holds the lease");
});

it("OTLP logs: one record per event of the chosen types, in the run's trace", async () => {
  const ids = await eventIds(a);
  const records = await until("the run's log records", () => {
    const mine = otlp.logs.filter((l) => l.attributes["agentd.run.id"] === a.runId);
    return mine.length >= ids.length ? mine : undefined;
  });
  assert.deepEqual(
    [...new Set(records.map((r) => r.attributes["agentd.event.id"]))].sort(),
    [...ids].sort(),
  );
  for (const r of records) {
    assert.equal(r.traceId, TRACE_ID, "correlated with the run's trace");
    const ev = JSON.parse(String(r.body)) as { eventId: string };
    assert.equal(ev.eventId, r.attributes["agentd.event.id"]);
    assert.ok(["run.queued", "output.delta"].includes(String(r.attributes["agentd.event.type"])));
  }
  // The record's time is the event's: within a minute of now (not 56 years ahead).
  for (const r of records) {
    const ev = JSON.parse(String(r.body)) as { ts: string };
    const ns = BigInt(r.timeUnixNano);
    assert.equal(
      ns,
      BigInt(Date.parse(ev.ts)) * 1_000_000n,
      `timeUnixNano is the event's ts ${ev.ts}`,
    );
    for (const [field, t] of [
      ["timeUnixNano", ns],
      ["observedTimeUnixNano", BigInt(r.observedTimeUnixNano)],
    ] as const) {
      const ms = Number(t / 1_000_000n);
      assert.ok(
        Math.abs(ms - Date.now()) < 60_000,
        `${field} ${new Date(ms).toISOString()} is within a minute of now`,
      );
    }
  }
});

it("a sink answering 500 or hanging is dead-lettered after its attempts; the API answers meanwhile", async () => {
  const p = (await stack.client.createRun({ prompt: "poison" }, TOKENS.acme)).run as Run;
  const h = (await stack.client.createRun({ prompt: "hang" }, TOKENS.acme)).run as Run;
  poison = p.runId;
  hang = h.runId;
  await Promise.all([
    appendEvents(stack.log, p, deltas(2, "p")),
    appendEvents(stack.log, h, deltas(2, "h")),
  ]);
  // While the sink hangs, the servers that deliver to it answer the API as usual.
  await until("a delivery to the hanging sink", () =>
    hook.deliveries.some((d) => d.runId === hang),
  );
  for (const x of exporters) {
    const client = new GrpcRunClient(x.addr, TOKENS.acme);
    try {
      for (let i = 0; i < 5; i++)
        assert.equal((await client.getRun(a.runId)).run?.runId, a.runId, `GetRun on ${x.addr}`);
    } finally {
      client.close();
    }
  }
  // The run queued before poison/hang were named may have been delivered: count from the deltas.
  const failing = [...(await eventIds(p)).slice(1), ...(await eventIds(h)).slice(1)];
  const dead = await until("the failing events dead-lettered", async () => {
    const letters = await state().deadLetters("hook", 100);
    return failing.every((id) => letters.some((l) => l.eventId === id)) ? letters : undefined;
  });
  for (const l of dead.filter((x) => failing.includes(x.eventId))) {
    assert.equal(l.attempts, 3);
    assert.match(l.error, /HTTP 500|timed out/);
  }
  // The sink goes on: new events of a good run still arrive.
  await appendEvents(stack.log, a, deltas(2, "after"));
  await allAccepted(a);
  const scraped = await Promise.all(
    exporters.map((x) => fetch(`${x.url}/metrics`).then((r) => r.text())),
  );
  const total = scraped
    .flatMap((t) => [...t.matchAll(/^agentd_export_dead_letters_total\{sink="hook"\} (\d+)/gm)])
    .reduce((n, m) => n + Number(m[1]), 0);
  assert.ok(total >= failing.length, `dead letters counted: ${total}`);
});

it("the deliverer SIGKILLed: the other takes over; nothing is lost", async () => {
  const first = await leader();
  assert.ok(first);
  const killedAt = Date.now();
  await first.kill();
  await appendEvents(stack.log, a, deltas(10, "takeover"));
  const ids = await allAccepted(a);
  const second = await leader();
  assert.ok(second !== undefined && second !== first, "the other exporter holds the lease");
  // Delivered after the kill: by the survivor, the only deliverer left.
  assert.ok(
    hook.deliveries.some((d) => d.at > killedAt),
    "the survivor delivered after the kill",
  );
  const dupes = ids.filter((id) => (hook.accepted.get(id) ?? 0) > 1);
  assert.ok(dupes.length <= 1, `at most the event in flight twice: ${dupes.length}`);
});

it("a full restart resumes from the stored cursor", async () => {
  for (const p of exporters) if (p.pid !== undefined) await p.stop().catch(() => undefined);
  const before = new Map(hook.accepted);
  await appendEvents(stack.log, a, deltas(5, "while down"));
  exporters.push(await startExporter());
  const ids = await allAccepted(a);
  const again = ids.filter(
    (id) => (before.get(id) ?? 0) > 0 && (hook.accepted.get(id) ?? 0) > (before.get(id) ?? 0),
  );
  assert.ok(again.length <= 1, `re-delivered after the restart: ${again.length}`);
});
