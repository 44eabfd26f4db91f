/**
 * Per-token API rate limits, for the router's `requestGate` after auth (before the body is
 * read): each token has a bucket (its `rate:` in the auth file, else the server's
 * `--rate-limit`); a call over it is RESOURCE_EXHAUSTED with a google.rpc.RetryInfo saying
 * when the next request is available. A stream counts once, when it opens. Must never:
 * limit grpc.health or grpc.reflection (probes and tooling), hold a call (it answers at
 * once), or key on anything but the token (a tenant's tokens are limited each on its own).
 */
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../../auth/tokens.ts";
import { RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { Rate, TokenBuckets } from "../../ratelimit/token-buckets.ts";
import { metrics } from "../../telemetry/metrics.ts";
import { kPrincipal } from "../context.ts";

export interface RateLimitOptions {
  buckets: TokenBuckets;
  /** The server's rate for tokens without their own `rate:` (--rate-limit); none: unlimited. */
  fallback?: Rate;
}

/** The bucket id of a principal without a token (auth off: the one local caller). */
const NO_TOKEN = "-";

/** For the router's `requestGate`, after auth: throws RESOURCE_EXHAUSTED over the limit. */
export function rateLimitGate(opts: RateLimitOptions): (ctx: HandlerContext) => void {
  return (ctx) => {
    if (ctx.service.typeName.startsWith("grpc.")) return;
    const principal = ctx.values.get(kPrincipal);
    if (principal === undefined) return;
    const refusal = checkRate(opts, principal);
    if (refusal !== undefined) throw refusal;
  };
}

/** Takes one request from the principal's bucket; the error to answer when there is none. */
export function checkRate(opts: RateLimitOptions, principal: Principal): ConnectError | undefined {
  const rate = principal.rate ?? opts.fallback;
  if (rate === undefined) return undefined;
  const took = opts.buckets.take(principal.tokenId ?? NO_TOKEN, rate);
  if (took.ok) return undefined;
  metrics.apiRequestsLimited.inc({ tenant: principal.tenantId });
  return rateLimited(rate, took.retryAfterMs);
}

/** RESOURCE_EXHAUSTED with RetryInfo: the delay until the token's next request. */
export function rateLimited(rate: Rate, retryAfterMs: number): ConnectError {
  const ms = Math.max(1, Math.ceil(retryAfterMs));
  const retryDelay = create(DurationSchema, {
    seconds: BigInt(Math.floor(ms / 1000)),
    nanos: (ms % 1000) * 1_000_000,
  });
  return new ConnectError(
    `rate limit: this token may make ${rate.perSecond} requests a second (burst ${rate.burst}); retry in ${ms} ms`,
    Code.ResourceExhausted,
    undefined,
    [{ desc: RetryInfoSchema, value: { retryDelay } }],
  );
}
