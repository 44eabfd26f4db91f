/**
 * A test's bounded wait: polls `probe` until it answers (anything but undefined, null or
 * false) and returns the answer. Not a timing claim: the cap is generous (a loaded machine
 * never reaches it); only something that never happens fails, with a message naming what
 * was awaited and, when given, what was seen instead. Must never: be used to assert how
 * fast something happens (that belongs in bench/), or swallow the probe's own assertion
 * failures (they are thrown as they are).
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface UntilOptions {
  /** The cap, generous: 120 s unless the awaited thing is known to be slow. */
  capMs?: number;
  /** Pause between probes. */
  everyMs?: number;
  /** What was seen instead, added to the failure's message. */
  detail?: () => string | Promise<string>;
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: UntilOptions = {},
): Promise<T> {
  const capMs = opts.capMs ?? 120_000;
  const giveUpAt = performance.now() + capMs;
  for (;;) {
    const answer = await probe();
    if (answer !== undefined && answer !== null && answer !== false) return answer;
    if (performance.now() >= giveUpAt) {
      const seen = opts.detail !== undefined ? `\n${await opts.detail()}` : "";
      throw new Error(`never happened within ${capMs / 1000} s: ${what}${seen}`);
    }
    await sleep(opts.everyMs ?? 200);
  }
}
