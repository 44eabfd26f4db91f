/**
 * Runs one exported function of a module in a worker thread under a hard cap on its time,
 * for tests whose point is that work on hostile input ends: linear, not quadratic or
 * exponential. The cap is generous (60 s by default): a loaded machine never reaches it,
 * runaway work does, and the worker is then stopped (V8 interrupts even a backtracking
 * regex). How long the work takes is a figure for bench/, not something a test asserts.
 *
 * The function gets `args` and its result comes back, both structured-cloned: build the
 * hostile input and check the result inside the module when they cannot cross threads.
 * Must never: be used to assert a duration, or run a module the test did not name.
 */
import { Worker } from "node:worker_threads";

/** The default cap: far past any honest run of the work, even on a loaded machine. */
export const HARD_CAP_MS = 60_000;

/**
 * `module`'s export `fn` called with `args` in a worker; its result. Rejects, naming
 * `what`, when the work is still running after `capMs` (runaway work) or throws.
 */
export async function finishesUnderCap<T>(
  what: string,
  module: URL,
  fn: string,
  args: readonly unknown[] = [],
  capMs = HARD_CAP_MS,
): Promise<T> {
  const worker = new Worker(new URL("./hard-cap-worker.ts", import.meta.url), {
    workerData: { module: module.href, fn, args },
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<T>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(`${what}: still running after ${capMs / 1000} s (runaway work); stopped`),
          ),
        capMs,
      );
      worker.once("message", (m: T) => resolve(m));
      worker.once("error", (err) => reject(new Error(`${what}: ${err.message}`, { cause: err })));
      worker.once("exit", (code) =>
        reject(new Error(`${what}: the worker exited (code ${code}) without a result`)),
      );
    });
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}
