/**
 * What the auth file says about each tenant (its `tenants:` map) and about each token's
 * API rate: the schema, and the parsed form the server reads. Tenants the map does not name
 * get the server's settings. Must never: hold behaviour (the policy loader, retention and
 * the limiters read these values; this module only validates them), or accept a value an
 * operator could misread (durations and sizes need their unit; unknown keys are refused).
 */
import { z } from "zod";
import { parseByteSize } from "../config/byte-size.ts";
import { parseDuration } from "../config/duration.ts";

/** Per-tenant limits; an absent limit is no limit (the server's, where it has one). */
export interface TenantLimits {
  concurrentRuns?: number;
  runsPerMinute?: number;
  tokensPerDay?: number;
  costPerDayUsd?: number;
  artifactBytes?: number;
  uploadBytes?: number;
}

export interface TenantConfig {
  /** Absolute path of the tenant's policy file (relative paths resolve against the auth file's directory). */
  policy?: string;
  /**
   * Absolute path of the tenant's candidate (shadow) policy: evaluated beside the enforced
   * one on every call, without effect (docs/policy.md, "Shadow mode").
   */
  shadowPolicy?: string;
  /** How long an ended run is kept, in ms (overrides `--retention`). */
  retentionMs?: number;
  limits: TenantLimits;
}

/** A token's API rate: a token bucket of `burst` requests refilled at `perSecond`. */
export interface TokenRate {
  perSecond: number;
  burst: number;
}

const duration = z.union([z.string(), z.number()]).transform((s, ctx) => {
  const ms = parseDuration(String(s));
  if (typeof ms === "string") ctx.addIssue({ code: "custom", message: ms });
  return typeof ms === "number" ? ms : 0;
});
const bytes = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const n = parseByteSize(v);
  if (typeof n === "string") ctx.addIssue({ code: "custom", message: n });
  return typeof n === "number" ? n : 0;
});
const count = z.number().int().min(1).max(1_000_000_000);

export const TenantLimitsSchema = z
  .object({
    concurrentRuns: count.optional(),
    runsPerMinute: count.optional(),
    tokensPerDay: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
    costPerDayUsd: z.number().positive().max(1e9).optional(),
    artifactBytes: bytes.optional(),
    uploadBytes: bytes.optional(),
  })
  .strict();

export const TenantConfigSchema = z
  .object({
    policy: z.string().min(1).max(4096).optional(),
    shadowPolicy: z.string().min(1).max(4096).optional(),
    retention: duration.optional(),
    limits: TenantLimitsSchema.optional(),
  })
  .strict();

export const TokenRateSchema = z
  .object({
    perSecond: z.number().positive().max(1_000_000),
    burst: z.number().int().min(1).max(1_000_000).optional(),
  })
  .strict();

/** The parsed form of one `tenants:` entry. */
export function toTenantConfig(
  raw: z.infer<typeof TenantConfigSchema>,
  resolvePath: (p: string) => string,
): TenantConfig {
  return {
    ...(raw.policy !== undefined ? { policy: resolvePath(raw.policy) } : {}),
    ...(raw.shadowPolicy !== undefined ? { shadowPolicy: resolvePath(raw.shadowPolicy) } : {}),
    ...(raw.retention !== undefined ? { retentionMs: raw.retention } : {}),
    limits: { ...(raw.limits ?? {}) },
  };
}

/** The parsed form of a token's `rate:` (burst defaults to one second's worth, at least 1). */
export function toTokenRate(raw: z.infer<typeof TokenRateSchema>): TokenRate {
  return { perSecond: raw.perSecond, burst: raw.burst ?? Math.max(1, Math.ceil(raw.perSecond)) };
}

/** What a tenant the auth file does not name gets: nothing of its own. */
export const NO_TENANT_CONFIG: TenantConfig = Object.freeze({ limits: Object.freeze({}) });
