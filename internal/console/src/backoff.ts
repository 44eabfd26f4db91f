/** Waits for reconnects: 0.5 s doubling to 5 s; ends early when the signal aborts. */
export const FIRST_DELAY_MS = 500;
export const MAX_DELAY_MS = 5_000;

export function nextDelay(ms: number): number {
  return Math.min(ms * 2, MAX_DELAY_MS);
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * How long a stream must stay open without an error to count as connected: the server
 * sends its headers with the first event, so a quiet stream shows no other sign of life.
 */
export const OPEN_AFTER_MS = 1_000;
