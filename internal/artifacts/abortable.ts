/**
 * A source of chunks that a signal can stop: what every artifact store's putStream reads
 * through. Never waits for a stuck source after an abort, and never keeps a chunk it
 * passed on.
 */
/**
 * The chunks of `source`, stopping at the first chunk boundary after `signal` aborts (with
 * the signal's reason) even while the source is still waiting for its next chunk.
 */
export async function* abortable(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  if (signal === undefined) {
    yield* source;
    return;
  }
  const it =
    Symbol.asyncIterator in source
      ? source[Symbol.asyncIterator]()
      : (source as Iterable<Uint8Array>)[Symbol.iterator]();
  try {
    for (;;) {
      const r = await nextOrAbort(it, signal);
      if (r.done === true) return;
      yield r.value;
    }
  } finally {
    // Stops a source left half-read (refused, failed or aborted): it frees what it holds.
    // After an abort its next() may still be pending, and a generator queues return()
    // behind it: started, not awaited, so an abort never waits for a stuck source.
    const stopped = it.return?.();
    if (signal.aborted) Promise.resolve(stopped).catch(() => undefined);
    else await stopped;
  }
}

/**
 * The iterator's next result, or the signal's reason once it aborts. The listener lives
 * for one call only: racing every chunk against one long-lived "aborted" promise would pile
 * a reaction per chunk onto it, each holding its chunk, until the end of the stream.
 */
function nextOrAbort<T>(
  it: Iterator<T> | AsyncIterator<T>,
  signal: AbortSignal,
): Promise<IteratorResult<T>> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    Promise.resolve(it.next()).then(
      (r) => {
        signal.removeEventListener("abort", onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
