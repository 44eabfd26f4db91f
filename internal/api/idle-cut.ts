/**
 * An upload whose client is too slow is cut: `source`'s chunks pass through, and
 *   - a wait for the next one longer than `idleMs` ends the stream with DEADLINE_EXCEEDED
 *     naming `setting` ("upload idle"), and
 *   - with `minBytesPerS`, every window of `idleMs` spent waiting for the client must bring
 *     at least `minBytesPerS × idleMs / 1000` bytes, or the stream ends with
 *     DEADLINE_EXCEEDED naming `rateSetting` ("upload too slow").
 * A client that opens a stream and goes quiet, or sends one byte per idle period, would
 * otherwise keep its tenant's upload turn (and the server's memory for the call) for ever.
 * Each window is counted on its own: a fast start does not buy a trickle after it.
 *
 * Must never: count time the consumer is busy (only the waits for the client are timed, so
 * a stream waiting for an unpack slot is never cut for it), or leave a timer running once
 * the stream ended.
 */
import { Code, ConnectError } from "@connectrpc/connect";

/** How a too-slow stream is told apart and cut. */
export interface IdleCut<T> {
  /** Longest wait for the next chunk that counts, ms; also the window the rate is counted over. */
  idleMs: number;
  /** The setting that sets idleMs, named in the error (e.g. "--upload-idle-ms"). */
  setting: string;
  /** Whether a chunk counts as activity (an empty message does not keep a stream alive). Default all. */
  counts?: (chunk: T) => boolean;
  /** Least bytes per second of waiting for the client, per window of idleMs. Default 0: no rate check. */
  minBytesPerS?: number;
  /** The setting that sets minBytesPerS, named in the error (e.g. "--upload-min-bytes-per-s"). */
  rateSetting?: string;
  /** A chunk's size in bytes, for the rate. Default 1 per chunk. */
  size?: (chunk: T) => number;
  /** Told the error when the stream is cut (the consumer may report another one). */
  onCut?: (err: ConnectError) => void;
}

/** The bytes a client has sent in the current window, and the time it was waited for in it. */
interface Window {
  bytes: number;
  waitedMs: number;
}

/**
 * The chunks of `source` that count; a wait longer than `idleMs`, or a window with too few
 * bytes, throws a DEADLINE_EXCEEDED ConnectError naming the setting. The source is
 * returned (closed) then.
 */
export async function* cutWhenIdle<T>(
  source: AsyncIterable<T>,
  opts: IdleCut<T>,
): AsyncGenerator<T> {
  const counts = opts.counts ?? (() => true);
  const it = source[Symbol.asyncIterator]();
  const window: Window = { bytes: 0, waitedMs: 0 };
  let cut = false;
  const fail = (err: ConnectError): never => {
    cut = true;
    opts.onCut?.(err);
    throw err;
  };
  try {
    for (;;) {
      // Several empty messages in a row are one wait: only a chunk that counts resets it.
      const next = nextCounting(it, counts);
      next.catch(() => undefined); // a source failing after the cut is nobody's to see
      const r = await waitTimed(next, window, opts, fail);
      if (r.done === true) return;
      yield r.value;
    }
  } finally {
    // A pending next() of a cut stream is abandoned: return() asks the source to close.
    if (cut) void Promise.resolve(it.return?.()).catch(() => undefined);
  }
}

/**
 * `next`, timed: the idle limit against this wait, the rate against the window (closed,
 * checked and started again whenever idleMs of waiting filled it, during a wait or at its end).
 */
async function waitTimed<T>(
  next: Promise<IteratorResult<T>>,
  window: Window,
  opts: IdleCut<T>,
  fail: (err: ConnectError) => never,
): Promise<IteratorResult<T>> {
  const { idleMs } = opts;
  const rate = opts.minBytesPerS ?? 0;
  const started = performance.now();
  for (;;) {
    const elapsed = performance.now() - started;
    const idleLeft = idleMs - elapsed;
    const windowLeft = rate > 0 ? idleMs - (window.waitedMs + elapsed) : Number.POSITIVE_INFINITY;
    const idleFirst = idleLeft <= windowLeft;
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<"time">((resolve) => {
      timer = setTimeout(() => resolve("time"), Math.max(0, Math.min(idleLeft, windowLeft)));
    });
    let r: IteratorResult<T> | "time";
    try {
      r = await Promise.race([next, timeUp]);
    } finally {
      clearTimeout(timer);
    }
    if (r === "time" && idleFirst)
      fail(
        new ConnectError(
          `upload idle: no bytes for ${idleMs} ms (the server's ${opts.setting}); the upload was cut and nothing was stored`,
          Code.DeadlineExceeded,
        ),
      );
    if (r === "time") {
      // The window filled while waiting: check it, and count the rest of the wait anew.
      closeWindow(window, opts, fail);
      window.waitedMs = -(performance.now() - started);
      continue;
    }
    window.waitedMs += performance.now() - started;
    if (r.done !== true) window.bytes += (opts.size ?? (() => 1))(r.value);
    if (rate > 0 && window.waitedMs >= idleMs) closeWindow(window, opts, fail);
    return r;
  }
}

/** A full window: too few bytes cut the stream; else the next window starts empty. */
function closeWindow<T>(
  window: Window,
  opts: IdleCut<T>,
  fail: (err: ConnectError) => never,
): void {
  const rate = opts.minBytesPerS ?? 0;
  const need = (rate * opts.idleMs) / 1000;
  if (window.bytes < need)
    fail(
      new ConnectError(
        `upload too slow: ${window.bytes} bytes in ${opts.idleMs} ms of waiting for the client, under the server's ${opts.rateSetting ?? "minimum rate"} (${rate} bytes/s); the upload was cut and nothing was stored`,
        Code.DeadlineExceeded,
      ),
    );
  window.bytes = 0;
  window.waitedMs = 0;
}

async function nextCounting<T>(
  it: AsyncIterator<T>,
  counts: (chunk: T) => boolean,
): Promise<IteratorResult<T>> {
  for (;;) {
    const r = await it.next();
    if (r.done === true || counts(r.value)) return r;
  }
}
