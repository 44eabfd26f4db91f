/**
 * Followers of a run whose stored log lost events they were sent (issue #26, point 4), over
 * a real `agentd server` on a real Redis: the store is cut back under live followers and
 * then grows a different chain. The SDK's follow is told to resync, starts over and ends
 * holding exactly the stored chain; the SSE stream sends `event: resync` and ends; neither
 * ever gets an event of the other chain as a continuation; the server counts both in
 * /metrics. And a follow resuming past the stored head (its server died meanwhile) is a
 * resync too, and so is one resuming onto a chain written again past its last seq (the
 * link check: the SDK's follow and the console's, over Connect-Web's transport).
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { followEvents } from "../../clients/typescript/src/follow.ts";
import { AgentdClient } from "../../clients/typescript/src/index.ts";
import { followRun } from "../console/src/follow-run.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { startAgentd } from "../testing/agentd-process.ts";
import {
  appendEvents,
  deltas,
  payload,
  type Stack,
  startCurl,
  startStack,
  TOKENS,
} from "../testing/api-fixtures.ts";
import { rewindRun } from "../testing/redis-rewind.ts";

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.stop();
});

/** Waits (up to 60 s on a loaded machine) for `probe` to hold. */
async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 1200 && !probe(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(probe(), `timed out waiting for ${what}`);
}

it("the store lost sent events: the SDK resyncs to the stored chain, SSE says resync, /metrics counts it", {
  timeout: 120_000,
}, async () => {
  const { run } = await stack.client.createRun({ prompt: "resync" });
  assert.ok(run !== undefined);
  await appendEvents(stack.log, run, [payload.started(), ...deltas(5, "before")]); // head: 7
  const sdk = new AgentdClient({ address: stack.server.addr, token: TOKENS.acme });
  let held: Event[] = [];
  const resyncs: string[] = [];
  const following = followEvents({
    client: sdk.rpc,
    runId: run.runId,
    afterSeq: 0n,
    onEvent: (ev) => {
      held.push(ev);
      return undefined;
    },
    onResync: (why) => {
      resyncs.push(why);
      held = [];
    },
  });
  const sse = startCurl([
    "--max-time",
    "90",
    "-H",
    `Authorization: Bearer ${TOKENS.acme}`,
    `${stack.server.url}/v1/runs/${run.runId}/events`,
  ]);
  try {
    await until("the SDK to hold seq 7", () => held.length === 7);
    await sse.waitFor(/^id: 7$/m, 60_000);
    // The loss: the store goes back to seq 3, then other events are written from there.
    await rewindRun(stack.redis.client(), "agentd:", run.runId, 3);
    await appendEvents(stack.log, run, deltas(6, "after")); // seq 4..9, another chain
    await until("the SDK to resync", () => resyncs.length > 0);
    await appendEvents(stack.log, run, [payload.completed()]);
    await following;
    const stored = (await stack.log.read(run.runId, 0)).map((e) => e.event);
    assert.equal(resyncs.length, 1, resyncs.join("\n"));
    assert.deepEqual(
      held.map((e) => `${e.seq}:${e.hash}`),
      stored.map((e) => `${e.seq}:${e.hash}`),
      "after the resync the SDK holds exactly the stored chain",
    );
    const { stdout } = await sse.done;
    assert.match(stdout, /^event: resync\ndata: \{"code":"data_loss",.*"storedSeq":\d+\}$/m);
    assert.doesNotMatch(stdout, /"text":"after /, "SSE sent an event of the other chain");
  } finally {
    sse.kill();
  }

  // Both followers' ends were counted by the server.
  const metrics = await (await fetch(`${stack.server.url}/metrics`)).text();
  const counted = Number(
    /^agentd_log_rewound_total\{found_by="follower"\} (\d+)$/m.exec(metrics)?.[1],
  );
  assert.ok(counted >= 2, `agentd_log_rewound_total{found_by="follower"} is ${counted}`);
});

it("a resume past the stored head (the server died, its Redis lost events): the SDK resyncs", {
  timeout: 180_000,
}, async () => {
  const port = await freePort();
  const listen = ["--listen", `127.0.0.1:${port}`];
  let server = await startAgentd("server", [...stack.flags, ...listen]);
  try {
    const { run } = await stack.client.createRun({ prompt: "resync on resume" });
    assert.ok(run !== undefined);
    await appendEvents(stack.log, run, [payload.started(), ...deltas(4)]); // head: 6
    const sdk = new AgentdClient({ address: `127.0.0.1:${port}`, token: TOKENS.acme });
    let held: Event[] = [];
    let told = 0;
    const following = followEvents({
      client: sdk.rpc,
      runId: run.runId,
      afterSeq: 0n,
      onEvent: (ev) => {
        held.push(ev);
        return undefined;
      },
      onResync: () => {
        told++;
        held = [];
      },
    });
    await until("the SDK to hold seq 6", () => held.length === 6);
    await server.stop("SIGKILL");
    await rewindRun(stack.redis.client(), "agentd:", run.runId, 2);
    server = await startAgentd("server", [...stack.flags, ...listen]);
    // The SDK resumes after seq 6: OUT_OF_RANGE, so it starts over from seq 0.
    await until("the SDK to resync", () => told > 0);
    await until("the SDK to hold the stored seq 2", () => held.length === 2);
    await appendEvents(stack.log, run, [payload.completed()]);
    await following;
    const stored = (await stack.log.read(run.runId, 0)).map((e) => `${e.seq}:${e.event.hash}`);
    assert.equal(told, 1);
    assert.deepEqual(
      held.map((e) => `${e.seq}:${e.hash}`),
      stored,
    );
  } finally {
    await server.stop("SIGKILL").catch(() => undefined);
  }
});

it("a resume onto a chain written again past its last seq (the server died, Redis lost events, the run went on): the SDK and the console resync by the link check", {
  timeout: 180_000,
}, async () => {
  const port = await freePort();
  const listen = ["--listen", `127.0.0.1:${port}`];
  let server = await startAgentd("server", [...stack.flags, ...listen]);
  const ac = new AbortController();
  try {
    const { run } = await stack.client.createRun({ prompt: "resync by the link check" });
    assert.ok(run !== undefined);
    await appendEvents(stack.log, run, [payload.started(), ...deltas(4, "before")]); // head: 6
    const sdk = new AgentdClient({ address: `127.0.0.1:${port}`, token: TOKENS.acme });
    let held: Event[] = [];
    let told = 0;
    const following = followEvents({
      client: sdk.rpc,
      runId: run.runId,
      afterSeq: 0n,
      onEvent: (ev) => {
        held.push(ev);
        return undefined;
      },
      onResync: () => {
        told++;
        held = [];
      },
    });
    const page = followInConsole(port, run.runId, ac.signal);
    await until("both to hold seq 6", () => held.length === 6 && page.shown.length === 6);
    await server.stop("SIGKILL");
    // Lost back to seq 2, then written again past seq 6: seq 7 exists, on another chain.
    await rewindRun(stack.redis.client(), "agentd:", run.runId, 2);
    await appendEvents(stack.log, run, deltas(6, "after")); // seq 3..8
    server = await startAgentd("server", [...stack.flags, ...listen]);
    await until("both to resync", () => told > 0 && page.told > 0);
    await appendEvents(stack.log, run, [payload.completed()]);
    await following;
    await page.done;
    const stored = (await stack.log.read(run.runId, 0)).map((e) => `${e.seq}:${e.event.hash}`);
    assert.equal(told, 1);
    assert.equal(page.told, 1);
    assert.deepEqual(
      held.map((e) => `${e.seq}:${e.hash}`),
      stored,
    );
    assert.deepEqual(
      page.shown.map((e) => `${e.seq}:${e.hash}`),
      stored,
      "the console shows exactly the stored chain",
    );
  } finally {
    ac.abort();
    await server.stop("SIGKILL").catch(() => undefined);
  }
});

it("a resume onto a log rewritten to exactly the last seq shown (the run ended there): the console resyncs", {
  timeout: 180_000,
}, async () => {
  const port = await freePort();
  const listen = ["--listen", `127.0.0.1:${port}`];
  let server = await startAgentd("server", [...stack.flags, ...listen]);
  const ac = new AbortController();
  try {
    const { run } = await stack.client.createRun({ prompt: "resync at the same seq" });
    assert.ok(run !== undefined);
    await appendEvents(stack.log, run, [payload.started(), ...deltas(4, "before")]); // head: 6
    const page = followInConsole(port, run.runId, ac.signal);
    await until("the console to show seq 6", () => page.shown.length === 6);
    await server.stop("SIGKILL");
    // Lost back to seq 3, then written again up to seq 6 exactly, ending the run there.
    await rewindRun(stack.redis.client(), "agentd:", run.runId, 3);
    await appendEvents(stack.log, run, [...deltas(2, "after"), payload.completed()]);
    server = await startAgentd("server", [...stack.flags, ...listen]);
    await page.done;
    const stored = (await stack.log.read(run.runId, 0)).map((e) => `${e.seq}:${e.event.hash}`);
    assert.equal(stored.length, 6);
    assert.equal(page.told, 1, "the console resynced");
    assert.deepEqual(
      page.shown.map((e) => `${e.seq}:${e.hash}`),
      stored,
      "the console shows exactly the stored chain",
    );
  } finally {
    ac.abort();
    await server.stop("SIGKILL").catch(() => undefined);
  }
});

/** The console's follow of a run: what the page shows now, how often it was told to resync. */
function followInConsole(port: number, runId: string, signal: AbortSignal) {
  const page = { shown: [] as Event[], told: 0, done: Promise.resolve() };
  page.done = followRun(
    consoleApi(port),
    runId,
    {
      onEvents: (evs) => {
        page.shown.push(...evs);
      },
      onResync: () => {
        page.told++;
        page.shown = [];
      },
      onStatus: () => undefined,
      onError: () => undefined,
      onRefused: (err) => assert.fail(`refused: ${String(err)}`),
    },
    signal,
  );
  return page;
}

/** The console's client, over Connect-Web's fetch transport as the page uses it. */
function consoleApi(port: number) {
  return createClient(
    RunService,
    createConnectTransport({
      baseUrl: `http://127.0.0.1:${port}`,
      useBinaryFormat: true,
      interceptors: [
        (next) => (req) => {
          req.header.set("Authorization", `Bearer ${TOKENS.acme}`);
          return next(req);
        },
      ],
    }),
  );
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}
