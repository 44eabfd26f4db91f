/**
 * The units of policy.yaml: sizes (bytes or "256KiB"/"1MiB"/"1GiB") and durations
 * (milliseconds or "500ms"/"30s"/"5m"/"1h"/"1d"), as zod types every section's schema
 * uses. Must never: accept a negative, fractional-byte or unsafe number.
 */
import { z } from "zod";

const UNITS: Record<string, number> = {
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  KIB: 1024,
  MIB: 1024 ** 2,
  GIB: 1024 ** 3,
};
const SIZE_EXPECTED = 'expected a size such as 1048576 (bytes), "256KiB", "1MiB" or "1GiB"';

/** Bytes: a non-negative integer or a string such as "256KiB". */
export const Size = z
  .union([z.number(), z.string()], {
    error: (iss) => `${SIZE_EXPECTED}, got ${JSON.stringify(iss.input)}`,
  })
  .transform((v, ctx) => {
    const m =
      typeof v === "string" ? /^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB]|[bB])\s*$/.exec(v) : null;
    const bytes =
      typeof v === "number"
        ? v
        : m
          ? Math.round(Number(m[1]) * (UNITS[(m[2] as string).toUpperCase()] ?? Number.NaN))
          : Number.NaN;
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      ctx.addIssue({ code: "custom", message: `${SIZE_EXPECTED}, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    return bytes;
  });

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};
const DURATION_EXPECTED = 'expected a duration such as 30000 (ms), "30s", "5m" or "1h"';

/** Milliseconds: a non-negative integer or a string such as "30s". */
export const Duration = z
  .union([z.number(), z.string()], {
    error: (iss) => `${DURATION_EXPECTED}, got ${JSON.stringify(iss.input)}`,
  })
  .transform((v, ctx) => {
    const m = typeof v === "string" ? /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(v) : null;
    const ms =
      typeof v === "number"
        ? v
        : m
          ? Math.round(Number(m[1]) * (DURATION_UNITS[m[2] as string] as number))
          : Number.NaN;
    if (!Number.isSafeInteger(ms) || ms < 0) {
      ctx.addIssue({ code: "custom", message: `${DURATION_EXPECTED}, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    return ms;
  });
