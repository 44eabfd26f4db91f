/** Functions hard-cap.test.ts runs in a worker: one that ends, one that never does, one that throws. */

export function double(x: number): number {
  return 2 * x;
}

/** Backtracks about 2^40 times: hours, unless the worker is stopped. */
export function backtrack(): boolean {
  return /^(a+)+$/.test(`${"a".repeat(40)}!`);
}

export function fail(): never {
  throw new Error("failed on purpose");
}
