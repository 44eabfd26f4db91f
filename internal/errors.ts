/**
 * The typed errors of agentd. Adapters throw these (never log-and-swallow); the RPC edge
 * maps `code` to a gRPC status in one place (internal/api/errors.ts).
 */

/** Stable, machine-readable error codes. */
export type ErrorCode =
  | "EVALIDATION" // bad input: names the field
  | "EPERMISSION" // caller or call not allowed
  | "EUNAUTHENTICATED" // no or wrong credentials
  | "ENOTFOUND" // no such thing (or not visible to this tenant)
  | "ECONFLICT" // state changed under the caller; retry or re-read
  | "EEXISTS" // the name is taken by something else (an idempotency key used for another request)
  | "EFENCED" // a stale writer (old lease epoch) tried to append
  | "EOUTOFRANGE" // a position past the end (e.g. after_seq beyond the last seq)
  | "ETOOLARGE" // a payload over its limit
  | "EBUSY" // a per-caller limit of concurrent work is reached (e.g. open event watches)
  | "ETIMEOUT"
  | "EUNAVAILABLE" // a dependency (Redis, disk) cannot be reached
  | "EUNIMPLEMENTED" // behaviour that lands in a later issue
  | "EPOLICY" // the kernel denied a call (the reason is given to the model)
  | "ESECRET_NOT_FOUND" // a $ENV.NAME placeholder names no available secret
  | "EENDED" // the run already ended: the log refuses anything after its terminal event
  | "ECANCELLED" // the run was asked to cancel: nothing more may start
  | "EREWOUND" // the stored log lost acknowledged events: it is behind what the caller saw
  | "ELIMIT_ARTIFACTS" // the tenant stores its artifactBytes limit or more (auth file)
  | "EIO"; // storage failed or holds corrupt data

export interface AgentdErrorOptions {
  /** The input field at fault, for EVALIDATION and friends (e.g. "after_seq"). */
  field?: string;
  cause?: unknown;
}

/** The one error class of agentd: a stable code, a message for people, an optional field. */
export class AgentdError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;

  constructor(code: ErrorCode, message: string, options: AgentdErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AgentdError";
    this.code = code;
    this.field = options.field;
  }
}

/** True when `err` is an AgentdError with the given code. */
export function isAgentdError(err: unknown, code?: ErrorCode): err is AgentdError {
  return err instanceof AgentdError && (code === undefined || err.code === code);
}

/** A validation error naming the field and what was expected. */
export function invalid(field: string, message: string): AgentdError {
  return new AgentdError("EVALIDATION", `${field}: ${message}`, { field });
}
