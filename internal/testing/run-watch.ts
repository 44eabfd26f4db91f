/**
 * Watching runs of a test cluster (internal/testing/cluster.ts): submit a run and stream
 * its events, wait for an event or the end, and check the invariants every run must keep
 * (gap-free, no duplicates, no call started twice, the chain verifies over the API and the
 * store, no container left). Shared by the chaos tests. Must never: wait without a deadline.
 */
import assert from "node:assert/strict";
import { ulid } from "ulid";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { range } from "./api-fixtures.ts";
import type { Cluster } from "./cluster.ts";
import { type EventStream, eventsJson } from "./grpc-run-client.ts";
import { tarOf } from "./tar.ts";

export interface Started {
  runId: string;
  sessionId: string;
  stream: EventStream;
}

type Payload = Event["payload"];
export type Case = NonNullable<Payload["case"]>;
/** The payload message of events of one case ("toolCall" → ToolCall). */
export type ValueOf<C extends Case> = Extract<Payload, { case: C }>["value"];

export function payloads<C extends Case>(events: readonly Event[], kind: C): ValueOf<C>[] {
  return events.filter((e) => e.payload.case === kind).map((e) => e.payload.value as ValueOf<C>);
}

export interface RunWatch {
  until<T>(
    what: string,
    probe: () => Promise<T | undefined> | T | undefined,
    timeoutMs?: number,
  ): Promise<T>;
  /** Creates a run whose prompt is `chaos-KIND-NONCE` (the scripted model's key) and streams it. */
  submit(kind: string, files?: { name: string; data: string }[]): Promise<Started>;
  waitEvent<C extends Case>(
    s: Started,
    kind: C,
    pred?: (v: ValueOf<C>) => boolean,
    timeoutMs?: number,
  ): Promise<ValueOf<C>>;
  waitTerminal(
    runId: string,
    timeoutMs?: number,
  ): Promise<NonNullable<Awaited<ReturnType<Cluster["client"]["getRun"]>>["run"]>>;
  assertHealthy(runId: string): Promise<Event[]>;
}

export function createRunWatch(c: Cluster): RunWatch {
  /** Polls `probe` until it returns a value (errors count as "not yet"); throws at the deadline. */
  async function until<T>(
    what: string,
    probe: () => Promise<T | undefined> | T | undefined,
    timeoutMs = 120_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let lastErr: unknown;
    for (;;) {
      try {
        const v = await probe();
        if (v !== undefined) return v;
      } catch (err) {
        lastErr = err;
      }
      if (Date.now() > deadline) {
        const why = lastErr === undefined ? "" : ` (last error: ${String(lastErr)})`;
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}${why}\n${c.diagnostics()}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function submit(kind: string, files = [{ name: "a.txt", data: "a\n" }]): Promise<Started> {
    const workspaceTar = await tarOf(files);
    const prompt = `chaos-${kind}-${ulid().toLowerCase()}`;
    const { run } = await c.client.createRun({ prompt, workspaceTar });
    assert.ok(run !== undefined);
    c.track(run.runId);
    return {
      runId: run.runId,
      sessionId: run.sessionId,
      stream: c.client.streamEvents({ runId: run.runId }),
    };
  }

  /** The first event of the live stream that matches. */

  function waitEvent<C extends Case>(
    s: Started,
    kind: C,
    pred: (v: ValueOf<C>) => boolean = () => true,
    timeoutMs = 120_000,
  ): Promise<ValueOf<C>> {
    const found = (): unknown => {
      for (const e of s.stream.events) {
        const value = e.payload.value as ValueOf<C>;
        if (e.payload.case === kind && pred(value)) return value;
      }
      return undefined;
    };
    return until(`${kind} in run ${s.runId}`, found, timeoutMs) as Promise<ValueOf<C>>;
  }

  async function waitTerminal(runId: string, timeoutMs = 120_000) {
    return until(
      `run ${runId} to end`,
      async () => {
        const { run } = await c.client.getRun(runId);
        const s = run?.state;
        return s === RunState.COMPLETED || s === RunState.FAILED || s === RunState.CANCELLED
          ? run
          : undefined;
      },
      timeoutMs,
    );
  }

  /**
   * The invariants of every run: completed, seq 1..N over the API and in the store, the hash
   * chain verifies over both, and no container labelled with the run is left.
   */
  async function assertHealthy(runId: string): Promise<Event[]> {
    const run = await waitTerminal(runId);
    assert.equal(
      run.state,
      RunState.COMPLETED,
      `run ${runId} ended ${RunState[run.state]}: ${run.error?.code} ${run.error?.message}\n${c.diagnostics()}`,
    );
    const history = c.client.streamEvents({ runId, historyOnly: true });
    const end = await history.end(10_000);
    assert.equal(end.status.code, 0, end.error?.message);
    const events = history.events;
    const trail = `${runId}: ${events.map((e) => `${e.seq}:${e.type}`).join(" ")}`;
    assert.deepEqual(
      events.map((e) => Number(e.seq)),
      range(1, events.length),
      `no gap, no duplicate seq: ${trail}`,
    );
    // Nothing was written twice (a commit re-sent after a lost reply must not land again).
    const unique = (what: string, keys: string[]) =>
      assert.equal(new Set(keys).size, keys.length, `duplicate ${what}: ${trail}`);
    unique(
      "event id",
      events.map((e) => e.eventId),
    );
    unique(
      "run.started",
      payloads(events, "runStarted").map(() => "started"),
    );
    unique(
      "run.completed",
      payloads(events, "runCompleted").map(() => "completed"),
    );
    unique(
      "tool.call",
      payloads(events, "toolCall").map((p) => p.callId),
    );
    unique(
      "tool.result",
      payloads(events, "toolResult").map((p) => p.callId),
    );
    // At most once: no call's execution began twice (a taker never runs a started call).
    unique(
      "tool.started",
      payloads(events, "toolStarted").map((p) => p.callId),
    );
    assert.equal(Number(run.lastSeq), events.length);
    assert.equal(events.at(-1)?.type, "run.completed", trail);
    const api = verifyChain(eventsJson(events));
    assert.ok(api.ok, `chain over the API: ${JSON.stringify(api)}`);
    const stored = (await c.log.read(runId, 0)).map((e) => e.json);
    const chain = verifyChain(stored);
    assert.ok(chain.ok, `chain over the store: ${JSON.stringify(chain)}`);
    assert.equal(stored.length, events.length);
    await until(`the containers of run ${runId} to be removed`, async () =>
      (await c.containersOf(runId)).length === 0 ? true : undefined,
    );
    return events;
  }

  return { until, submit, waitEvent, waitTerminal, assertHealthy } as RunWatch;
}
