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

describe("cutWhenIdle with a minimum rate", () => {
  const bytes = (c: Uint8Array) => c.byteLength;

  it("cuts a stream that trickles a byte at a time, naming the rate setting", async () => {
    async function* trickle() {
      for (;;) {
        await sleep(10);
        yield new Uint8Array(1);
      }
    }
    let told: ConnectError | undefined;
    await assert.rejects(
      (async () => {
        for await (const _ of cutWhenIdle(trickle(), {
          idleMs: 300,
          setting: "--upload-idle-ms",
          minBytesPerS: 1_000_000,
          rateSetting: "--upload-min-bytes-per-s",
          size: bytes,
          onCut: (e) => {
            told = e;
          },
        }));
      })(),
      (err: unknown) =>
        err instanceof ConnectError &&
        err.code === Code.DeadlineExceeded &&
        /upload too slow/.test(err.message) &&
        /--upload-min-bytes-per-s \(1000000 bytes\/s\)/.test(err.message),
    );
    assert.match(told?.message ?? "", /too slow/);
  });

  it("a fast start does not buy a trickle after it: each window is counted on its own", async () => {
    async function* fastThenTrickle() {
      yield new Uint8Array(1024 * 1024);
      for (;;) {
        await sleep(10);
        yield new Uint8Array(1);
      }
    }
    let seen = 0;
    await assert.rejects(
      (async () => {
        for await (const c of cutWhenIdle(fastThenTrickle(), {
          idleMs: 300,
          setting: "--upload-idle-ms",
          minBytesPerS: 100_000,
          rateSetting: "--upload-min-bytes-per-s",
          size: bytes,
        }))
          seen += c.byteLength;
      })(),
      /upload too slow/,
    );
    assert.ok(seen > 1024 * 1024, "the fast start and some of the trickle went through");
  });

  it("passes a stream at or above the rate, and an idle wait is still cut as idle", async () => {
    async function* steady() {
      for (let i = 0; i < 20; i++) {
        await sleep(5);
        yield new Uint8Array(64 * 1024);
      }
    }
    let got = 0;
    for await (const c of cutWhenIdle(steady(), {
      idleMs: 10_000,
      setting: "--upload-idle-ms",
      minBytesPerS: 1000,
      rateSetting: "--upload-min-bytes-per-s",
      size: bytes,
    }))
      got += c.byteLength;
    assert.equal(got, 20 * 64 * 1024);
    async function* silent(): AsyncGenerator<Uint8Array> {
      await new Promise(() => undefined);
    }
    await assert.rejects(
      (async () => {
        for await (const _ of cutWhenIdle(silent(), {
          idleMs: 100,
          setting: "--upload-idle-ms",
          minBytesPerS: 1000,
          rateSetting: "--upload-min-bytes-per-s",
          size: bytes,
        }));
      })(),
      /upload idle: no bytes for 100 ms/,
    );
  });
});
