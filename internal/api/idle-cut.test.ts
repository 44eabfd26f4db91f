/** cutWhenIdle: a stream that sends nothing that counts for idleMs ends with DEADLINE_EXCEEDED. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { cutWhenIdle } from "./idle-cut.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("cutWhenIdle", () => {
  it("passes a stream that keeps sending through, whole", async () => {
    async function* steady() {
      for (let i = 0; i < 5; i++) {
        await sleep(5);
        yield i;
      }
    }
    const got: number[] = [];
    for await (const n of cutWhenIdle(steady(), { idleMs: 10_000, setting: "--x" })) got.push(n);
    assert.deepEqual(got, [0, 1, 2, 3, 4]);
  });

  it("cuts a stream that goes quiet, naming the setting, and tells onCut", async () => {
    let returned = false;
    let told: ConnectError | undefined;
    async function* quiet() {
      try {
        yield 1;
        await new Promise(() => undefined); // never sends again
      } finally {
        returned = true;
      }
    }
    const got: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const n of cutWhenIdle(quiet(), {
          idleMs: 50,
          setting: "--upload-idle-ms",
          onCut: (e) => {
            told = e;
          },
        }))
          got.push(n);
      })(),
      (err: unknown) =>
        err instanceof ConnectError &&
        err.code === Code.DeadlineExceeded &&
        /--upload-idle-ms/.test(err.message) &&
        /50 ms/.test(err.message),
    );
    assert.deepEqual(got, [1]);
    assert.equal(told?.code, Code.DeadlineExceeded);
    assert.equal(returned, false, "a generator stuck in a wait cannot run its finally yet");
  });

  it("chunks that do not count (empty messages) do not keep a stream alive", async () => {
    async function* keepAlive() {
      for (;;) {
        await sleep(5);
        yield new Uint8Array(0);
      }
    }
    await assert.rejects(
      (async () => {
        for await (const _ of cutWhenIdle(keepAlive(), {
          idleMs: 60,
          setting: "--upload-idle-ms",
          counts: (c) => c.byteLength > 0,
        }));
      })(),
      /upload idle/,
    );
  });
});
