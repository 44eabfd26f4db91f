/**
 * Coalesces the model's text deltas into `output.delta` chunks: at most one chunk per
 * interval (default 50 ms, so ~20 events a second), plus a chunk whenever the worker
 * flushes (before a tool call, at finish, at the end of a step) or the buffer reaches its
 * size cap. Pure: the clock and timer are injected; `emit` is called synchronously, in
 * order, so the caller appends chunks in the order it receives them.
 *
 * Must never: drop text, reorder text, split a delta (so never a UTF-16 surrogate pair),
 * or emit an empty chunk.
 */

export interface CoalescerClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const systemClock: CoalescerClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface OutputCoalescerOptions {
  /** Receives each coalesced chunk, in order. */
  emit: (text: string) => void;
  /** Minimum time between two timed chunks (default 50 ms). */
  intervalMs?: number;
  /** Buffered characters that force a chunk at once (default 64 Ki). */
  maxChars?: number;
  clock?: CoalescerClock;
}

export interface OutputCoalescer {
  /** Adds a delta; it is emitted within one interval. */
  push(text: string): void;
  /** Emits what is buffered now (call before a tool call or the finish is handled). */
  flush(): void;
  /** Flushes and stops: later pushes are refused. */
  close(): void;
}

export function createOutputCoalescer(opts: OutputCoalescerOptions): OutputCoalescer {
  const intervalMs = opts.intervalMs ?? 50;
  const maxChars = opts.maxChars ?? 64 * 1024;
  const clock = opts.clock ?? systemClock;
  let parts: string[] = [];
  let chars = 0;
  let lastEmitAt = Number.NEGATIVE_INFINITY;
  let timer: unknown;
  let closed = false;

  const flush = (): void => {
    if (timer !== undefined) {
      clock.clearTimeout(timer);
      timer = undefined;
    }
    if (chars === 0) return;
    const text = parts.join("");
    parts = [];
    chars = 0;
    lastEmitAt = clock.now();
    opts.emit(text);
  };

  return {
    push(text) {
      if (closed) throw new Error("output coalescer: push after close");
      if (text === "") return;
      parts.push(text);
      chars += text.length;
      if (chars >= maxChars) return flush();
      if (timer === undefined) {
        // The first chunk after a quiet period goes out on the next tick (a burst of
        // deltas in the same tick still joins it); later ones wait for the interval.
        const wait = Math.max(0, lastEmitAt + intervalMs - clock.now());
        timer = clock.setTimeout(() => {
          timer = undefined;
          flush();
        }, wait);
      }
    },
    flush,
    close() {
      flush();
      closed = true;
    },
  };
}
