/**
 * An upload that sends nothing for too long is cut: `source`'s chunks pass through, and a
 * wait for the next one longer than `idleMs` ends the stream with DEADLINE_EXCEEDED naming
 * the limit and its setting. A client that opens a stream and goes quiet would otherwise
 * keep its tenant's upload turn (and the server's memory for the call) for ever.
 *
 * Must never: cut a stream while its consumer is busy (only the wait for the client is
 * timed), or leave a timer running once the stream ended.
 */
import { Code, ConnectError } from "@connectrpc/connect";

/** How an idle stream is told apart and cut. */
export interface IdleCut<T> {
  /** Longest wait for the next chunk that counts, ms. */
  idleMs: number;
  /** The setting that sets idleMs, named in the error (e.g. "--upload-idle-ms"). */
  setting: string;
  /** Whether a chunk counts as activity (an empty message does not keep a stream alive). Default all. */
  counts?: (chunk: T) => boolean;
  /** Told the error when the stream is cut (the consumer may report another one). */
  onCut?: (err: ConnectError) => void;
}

/**
 * The chunks of `source` that count; waiting longer than `idleMs` for one throws a
 * DEADLINE_EXCEEDED ConnectError naming the setting. The source is returned (closed) then.
 */
export async function* cutWhenIdle<T>(
  source: AsyncIterable<T>,
  opts: IdleCut<T>,
): AsyncGenerator<T> {
  const { idleMs, setting } = opts;
  const counts = opts.counts ?? (() => true);
  const it = source[Symbol.asyncIterator]();
  let cut = false;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const idle = new Promise<"idle">((resolve) => {
        timer = setTimeout(() => resolve("idle"), idleMs);
      });
      let r: IteratorResult<T> | "idle";
      try {
        // Several empty messages in a row are one wait: only a chunk that counts resets it.
        const next = nextCounting(it, counts);
        next.catch(() => undefined); // a source failing after the cut is nobody's to see
        r = await Promise.race([next, idle]);
      } finally {
        clearTimeout(timer);
      }
      if (r === "idle") {
        cut = true;
        const err = new ConnectError(
          `upload idle: no bytes for ${idleMs} ms (the server's ${setting}); the upload was cut and nothing was stored`,
          Code.DeadlineExceeded,
        );
        opts.onCut?.(err);
        throw err;
      }
      if (r.done === true) return;
      yield r.value;
    }
  } finally {
    // A pending next() of a cut stream is abandoned: return() asks the source to close.
    if (cut) void Promise.resolve(it.return?.()).catch(() => undefined);
  }
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
