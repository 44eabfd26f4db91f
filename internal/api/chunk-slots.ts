/**
 * An unpack slot per chunk of work, not per stream: the chunks of `source` come out one at
 * a time, each only once a slot of `slots` is held, and the slot goes back when the
 * consumer asks for the next chunk, before the source is asked for it. A client that holds
 * its stream open and sends nothing holds no slot: every other upload (another tenant's,
 * CreateRun's inline archive, cut into chunks too) takes its turn meanwhile, in the
 * tenants' round-robin when the slots are fair-slots.ts's.
 *
 * The consumer (workspace-stream.ts) keeps at most a chunk or two in its pipeline buffers
 * past the slot (gunzip's input, tar's back-pressure), so the work done without a slot is
 * bounded by a couple of chunks per stream, never a stream's length.
 *
 * Must never: hold a slot while waiting for the source, or keep one after the stream ended,
 * failed or was abandoned.
 */
/** Where slots come from: a semaphore, or one tenant's turns of the fair slots. */
export interface SlotSource {
  /** Waits for a slot; the result gives it back. */
  acquire(signal?: AbortSignal): Promise<() => void>;
}

/** `source`'s chunks, each while holding a slot of `slots`; `signal` ends a wait for one. */
export async function* slotPerChunk<T>(
  source: AsyncIterable<T> | Iterable<T>,
  slots: SlotSource,
  signal?: AbortSignal,
): AsyncGenerator<T> {
  let release: (() => void) | undefined;
  try {
    for await (const chunk of source) {
      release = await slots.acquire(signal);
      yield chunk;
      release();
      release = undefined;
    }
  } finally {
    release?.();
  }
}
