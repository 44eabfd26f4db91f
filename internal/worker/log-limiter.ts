/**
 * Log lines rate-limited per cause: during an outage every slot of every worker fails the
 * same way many times a second, and a log that repeats it buries everything else (1,574
 * lines in 12 s were seen with Redis out of memory). The first line of a cause is logged;
 * the same cause again within `intervalMs` is counted, and the next line logged says how
 * many were left out. Must never: drop the first occurrence of a cause, or hold state for
 * more causes than `maxCauses` (the oldest are forgotten).
 */
import type { Logger } from "../telemetry/logger.ts";

export interface LogLimiter {
  warn(cause: string, obj: Record<string, unknown>, msg: string): void;
  error(cause: string, obj: Record<string, unknown>, msg: string): void;
}

export function createLogLimiter(opts: {
  logger: Logger;
  intervalMs?: number;
  maxCauses?: number;
  now?: () => number;
}): LogLimiter {
  const interval = opts.intervalMs ?? 10_000;
  const max = opts.maxCauses ?? 256;
  const now = opts.now ?? Date.now;
  const seen = new Map<string, { at: number; suppressed: number }>();
  const emit = (
    level: "warn" | "error",
    cause: string,
    obj: Record<string, unknown>,
    msg: string,
  ) => {
    const t = now();
    const s = seen.get(cause);
    if (s !== undefined && t - s.at < interval) {
      s.suppressed++;
      return;
    }
    const suppressed = s?.suppressed ?? 0;
    seen.delete(cause);
    seen.set(cause, { at: t, suppressed: 0 });
    if (seen.size > max) seen.delete(seen.keys().next().value as string);
    opts.logger[level]({ ...obj, cause, ...(suppressed > 0 ? { suppressed } : {}) }, msg);
  };
  return {
    warn: (cause, obj, msg) => emit("warn", cause, obj, msg),
    error: (cause, obj, msg) => emit("error", cause, obj, msg),
  };
}
