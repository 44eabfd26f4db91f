/**
 * The counts a run's budget checks read from its log (run-counts.ts): wall time from the
 * first run.started with every paused stretch left out — a pause resumed in place, a pause
 * that ended in another drive's run.resumed (a takeover), a pause still going on, a taker
 * whose clock is behind or ahead of its predecessor's — and steps and the last prompt from
 * usage.updated.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema } from "../gen/agentd/v1/events_pb.js";
import { lastPromptTokens, stepsSoFar, wallUsedMs } from "./run-counts.ts";

type Payload = Event["payload"];
const at = (ms: number, payload: Payload): Event =>
  create(EventSchema, { ts: timestampFromMs(ms), payload });
const started: Payload = { case: "runStarted", value: {} as never };
const resumed: Payload = { case: "runResumed", value: {} as never };
const paused: Payload = { case: "runPaused", value: {} as never };
const usage = (steps: number, input: number): Payload =>
  ({
    case: "usageUpdated",
    value: { steps, usage: { inputTokens: BigInt(input), outputTokens: 0n } },
  }) as never;

describe("run counts from the log", () => {
  it("wall time runs from the first run.started and skips each paused stretch", () => {
    const events = [
      at(1_000, { case: "runQueued", value: {} as never }),
      at(2_000, started),
      at(3_000, paused),
      at(60_000, resumed), // resumed in place
      at(61_000, paused),
      at(500_000, resumed), // a takeover resumed it
    ];
    // 1 s before the first pause, 1 s between the pauses, 10 s since the last resume.
    assert.equal(wallUsedMs(events, 510_000), 12_000);
  });

  it("a run paused now counts only up to its pause; a takeover without a pause counts", () => {
    const events = [at(0, started), at(5_000, paused)];
    assert.equal(wallUsedMs(events, 900_000), 5_000);
    // An owner died at 5 s, the next took over at 20 s: no person was waited for.
    const lost = [at(0, started), at(20_000, resumed)];
    assert.equal(wallUsedMs(lost, 25_000), 25_000);
  });

  it("a taker whose clock is 10 min behind gets nothing back of what the log shows spent", () => {
    const T = 1_800_000_000_000;
    const events = [
      at(T, started),
      at(T + 600_000, usage(50, 10)), // the first drive's own clock: 10 min spent
      at(T + 1_000, resumed), // the taker, its clock 10 min behind, resumes
      at(T + 1_500, usage(51, 20)),
    ];
    // 10 min of the first drive, then the taker's own 1 s (to T + 2 s on its clock).
    assert.equal(wallUsedMs(events, T + 2_000), 601_000);
    // Its clock going on counts forward from its own events, never from the predecessor's.
    assert.equal(wallUsedMs(events, T + 61_000), 660_000);
  });

  it("a clock behind inside a pause, and a taker ahead, never lower the count", () => {
    const T = 1_800_000_000_000;
    // Paused at T + 5 s; the taker (5 min behind) resumes: the pause counts 0, not minus.
    const behind = [at(T, started), at(T + 5_000, paused), at(T - 300_000, resumed)];
    assert.equal(wallUsedMs(behind, T - 299_000), 6_000);
    // A taker 5 min ahead: its lead counts once (the budget ends early, never late).
    const ahead = [at(T, started), at(T + 5_000, usage(1, 1)), at(T + 305_000, resumed)];
    assert.equal(wallUsedMs(ahead, T + 306_000), 306_000);
  });

  it("nothing is used before the run started", () => {
    assert.equal(wallUsedMs([at(0, { case: "runQueued", value: {} as never })], 9_000), 0);
  });

  it("steps and the last prompt come from the last usage.updated events", () => {
    const events = [at(0, started), at(1, usage(1, 20)), at(2, usage(2, 45))];
    assert.equal(stepsSoFar(events), 2);
    assert.equal(lastPromptTokens(events), 25);
    assert.equal(lastPromptTokens(events.slice(0, 2)), 20);
    assert.equal(stepsSoFar([at(0, started)]), 0);
    assert.equal(lastPromptTokens([at(0, started)]), undefined);
    const compacted = [...events, at(3, { case: "checkpointCreated", value: {} as never })];
    assert.equal(lastPromptTokens(compacted), undefined, "a compacted context may be smaller");
  });
});
