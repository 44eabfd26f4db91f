/**
 * WatchEvents and GET /v1/events against a real `agentd server` on a private Redis: the
 * tenant-wide feed across runs, its filters (type, family, labels), resuming from a cursor
 * (exactly the rest), two watchers at once, tenant isolation, and hostile input.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { MAX_WATCHES_PER_TENANT } from "../api/tenant-feed.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { type Run, RunService } from "../gen/agentd/v1/run_service_pb.js";
import {
  appendEvents,
  deltas,
  parseSse,
  type Stack,
  startStack,
  TOKENS,
} from "../testing/api-fixtures.ts";
import type { GrpcRunClient } from "../testing/grpc-run-client.ts";
import { grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

interface Item {
  event: Event;
  cursor: string;
}

/** A WatchEvents call collecting what it gets. */
function watch(
  init: { cursor?: string; fromOldest?: boolean; types?: string[]; labelSelector?: string },
  token: string = TOKENS.acme,
  client: GrpcRunClient = stack.client,
) {
  const items: Item[] = [];
  const call = client.serverStream(RunService.method.watchEvents, init, token);
  let error: grpc.ServiceError | undefined;
  call.on("data", (m: { event?: Event; cursor: string }) => {
    if (m.event !== undefined) items.push({ event: m.event, cursor: m.cursor });
  });
  const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
    call.on("error", (e: grpc.ServiceError) => {
      error = e;
      resolve(e);
    });
    call.on("end", () => resolve(error));
  });
  return {
    items,
    ended,
    cancel: () => call.cancel(),
    /** Waits for `n` items; generous (120 s): only items that never come fail it. */
    async until(n: number, ms = 120_000): Promise<void> {
      const deadline = Date.now() + ms;
      while (items.length < n) {
        if (error !== undefined) throw error;
        if (Date.now() > deadline)
          throw new Error(`waited ${ms} ms for ${n} items of the watch: ${items.length} came`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

const key = (e: Event) => `${e.runId}#${e.seq}`;

async function newRun(token: string, labels: Record<string, string> = {}): Promise<Run> {
  const { run } = await stack.client.createRun({ prompt: "watch me", labels }, token);
  assert.ok(run);
  return run;
}

let infra: Run;
let web: Run;
let globex: Run;
let all: ReturnType<typeof watch>;
const PER_RUN = 6;

it("a watcher from now gets every event of its tenant's runs, and none of another tenant's", async () => {
  all = watch({});
  await new Promise((r) => setTimeout(r, 300)); // the watch starts at the head
  infra = await newRun(TOKENS.acme, { team: "infra" });
  web = await newRun(TOKENS.acme, { team: "web" });
  globex = await newRun(TOKENS.globex);
  await Promise.all([
    appendEvents(stack.log, infra, deltas(PER_RUN, "infra")),
    appendEvents(stack.log, web, deltas(PER_RUN, "web")),
    appendEvents(stack.log, globex, deltas(PER_RUN, "globex")),
  ]);
  await all.until(2 * (PER_RUN + 1));
  await new Promise((r) => setTimeout(r, 300));
  const got = all.items.map((i) => i.event);
  assert.equal(got.length, 2 * (PER_RUN + 1), "nothing more, nothing twice");
  assert.ok(
    got.every((e) => e.runId === infra.runId || e.runId === web.runId),
    "acme's only",
  );
  for (const run of [infra, web]) {
    const seqs = got.filter((e) => e.runId === run.runId).map((e) => Number(e.seq));
    assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7], "each run's events in order");
  }
  assert.equal(new Set(all.items.map((i) => i.cursor)).size, all.items.length, "unique cursors");
});

it("resuming from any cursor gives exactly the events after it", async () => {
  for (const k of [0, 4, all.items.length - 2]) {
    const from = all.items[k] as Item;
    const w = watch({ cursor: from.cursor });
    const want = all.items.slice(k + 1).map((i) => key(i.event));
    await w.until(want.length);
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(
      w.items.map((i) => key(i.event)),
      want,
      `after item ${k}`,
    );
    w.cancel();
  }
});

it("filters: a type, a family, a label selector; from the oldest kept", async () => {
  const queued = watch({ fromOldest: true, types: ["run.queued"] });
  const family = watch({ fromOldest: true, types: ["output.*"], labelSelector: "team=infra" });
  await queued.until(2);
  await family.until(PER_RUN);
  await new Promise((r) => setTimeout(r, 300));
  const queuedRuns = queued.items.map((i) => i.event.runId);
  assert.ok(queuedRuns.includes(infra.runId) && queuedRuns.includes(web.runId));
  assert.ok(!queuedRuns.includes(globex.runId));
  assert.ok(queued.items.every((i) => i.event.type === "run.queued"));
  assert.deepEqual(
    family.items.map((i) => [i.event.runId, i.event.type]),
    Array.from({ length: PER_RUN }, () => [infra.runId, "output.delta"]),
  );
  queued.cancel();
  family.cancel();
});

it("two watchers at once see the same events in the same order; a reader may watch", async () => {
  const a = watch({});
  const b = watch({}, TOKENS.acmeReader);
  await new Promise((r) => setTimeout(r, 300));
  const run = await newRun(TOKENS.acme);
  await appendEvents(stack.log, run, deltas(20, "both"));
  await a.until(21);
  await b.until(21);
  assert.deepEqual(
    a.items.map((i) => key(i.event)),
    b.items.map((i) => key(i.event)),
  );
  a.cancel();
  b.cancel();
});

it("hostile input: malformed cursor, type or selector is INVALID_ARGUMENT; a trimmed cursor OUT_OF_RANGE", async () => {
  const cases: [Parameters<typeof watch>[0], grpc.status, RegExp][] = [
    [{ cursor: "garbage" }, grpc.status.INVALID_ARGUMENT, /cursor/],
    [{ cursor: "1-0:x" }, grpc.status.INVALID_ARGUMENT, /cursor/],
    [{ types: ["Bad Type"] }, grpc.status.INVALID_ARGUMENT, /types\[0\]/],
    [
      { types: Array.from({ length: 65 }, () => "run.queued") },
      grpc.status.INVALID_ARGUMENT,
      /types/,
    ],
    [{ labelSelector: "team in (" }, grpc.status.INVALID_ARGUMENT, /label_selector/],
    [{ cursor: "99999999999999999999-0:1" }, grpc.status.INVALID_ARGUMENT, /cursor/],
    [{ cursor: "0-1:1" }, grpc.status.OUT_OF_RANGE, /cursor/],
  ];
  for (const [init, code, field] of cases) {
    const w = watch(init);
    const err = await w.ended;
    assert.equal(err?.code, code, JSON.stringify(init).slice(0, 80));
    assert.match(err?.details ?? "", field);
  }
  const noToken = watch({}, "");
  assert.equal((await noToken.ended)?.code, grpc.status.UNAUTHENTICATED);
  all.cancel();
});

it("GET /v1/events streams the same feed as SSE and resumes with Last-Event-ID", async () => {
  const url = `${stack.server.url}/v1/events?from_oldest=true&types=output.delta&labels=team%3Dweb`;
  const read = async (headers: Record<string, string>, n: number): Promise<string> => {
    const ac = new AbortController();
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${TOKENS.acme}`, ...headers },
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    let body = "";
    const decoder = new TextDecoder();
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const deadline = Date.now() + 120_000; // generous: the count is asserted after
    while (parseSse(body).length < n && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      body += decoder.decode(value, { stream: true });
    }
    ac.abort();
    return body;
  };
  const first = parseSse(await read({}, PER_RUN));
  assert.equal(first.length, PER_RUN);
  for (const e of first) {
    assert.equal(e.event, "output.delta");
    assert.equal((JSON.parse(e.data) as { runId: string }).runId, web.runId);
  }
  const resumed = parseSse(await read({ "last-event-id": first[1]?.id as string }, PER_RUN - 2));
  assert.deepEqual(
    resumed.map((e) => e.id),
    first.slice(2).map((e) => e.id),
  );
  const bad = await fetch(`${stack.server.url}/v1/events?cursor=nope`, {
    headers: { authorization: `Bearer ${TOKENS.acme}` },
  });
  assert.equal(bad.status, 400);
  assert.match(await bad.text(), /cursor/);
  const anon = await fetch(`${stack.server.url}/v1/events`);
  assert.equal(anon.status, 401);
  // A cursor the feed no longer holds is an error before the stream: EventSource-style
  // clients would otherwise reconnect with it forever.
  const stale = await fetch(`${stack.server.url}/v1/events`, {
    headers: { authorization: `Bearer ${TOKENS.acme}`, "last-event-id": "0-1:1" },
  });
  assert.equal(stale.status, 400);
  assert.match(await stale.text(), /"code":"out_of_range".*"field":"cursor"/);
});

it("a tenant holds at most MAX_WATCHES_PER_TENANT watches on a server; one more is RESOURCE_EXHAUSTED", async () => {
  const open = Array.from({ length: MAX_WATCHES_PER_TENANT }, () => watch({}, TOKENS.globex));
  await new Promise((r) => setTimeout(r, 500));
  const extra = watch({}, TOKENS.globex);
  const err = await extra.ended;
  assert.equal(err?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.match(err?.details ?? "", /at most 32/);
  // Another tenant is not affected; a closed watch gives its slot back.
  const other = watch({}, TOKENS.acme);
  (open[0] as ReturnType<typeof watch>).cancel();
  await new Promise((r) => setTimeout(r, 300));
  const again = watch({}, TOKENS.globex);
  await new Promise((r) => setTimeout(r, 300));
  for (const w of [other, again]) {
    let ended = false;
    void w.ended.then(() => {
      ended = true;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(ended, false, "still open");
    w.cancel();
  }
  for (const w of open) w.cancel();
});

it("Redis paused under a watch: the stream ends UNAVAILABLE, and a resume from its last cursor misses nothing", async () => {
  const w = watch({});
  await new Promise((r) => setTimeout(r, 300));
  const run = await newRun(TOKENS.acme);
  await appendEvents(stack.log, run, deltas(3, "before"));
  await w.until(4);
  const admin = stack.redis.client();
  await admin.call("CLIENT", "PAUSE", "7000", "ALL");
  const err = await Promise.race([
    w.ended,
    new Promise<undefined>((r) => setTimeout(() => r(undefined), 15_000)),
  ]);
  await admin.call("CLIENT", "UNPAUSE");
  assert.equal(err?.code, grpc.status.UNAVAILABLE, "the watch says why it stopped, never hangs");
  await appendEvents(stack.log, run, deltas(2, "after"));
  const last = w.items.at(-1) as Item;
  const again = watch({ cursor: last.cursor });
  await again.until(2);
  assert.deepEqual(
    again.items.map((i) => Number(i.event.seq)),
    [5, 6],
  );
  again.cancel();
});
