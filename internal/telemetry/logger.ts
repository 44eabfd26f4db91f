/** pino JSON logs: one line per record, to stdout. Never log tokens or secret values. */
import { type Logger, pino } from "pino";

export type { Logger };

export interface LoggerOptions {
  /** pino level; default "info". */
  level?: string;
  /** Component name in every line. */
  name?: string;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino({
    level: opts.level ?? "info",
    name: opts.name ?? "agentd",
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ["req.headers.authorization", "authorization", "token"],
      censor: "[redacted]",
    },
  });
}
