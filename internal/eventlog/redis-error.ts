/**
 * A Redis failure as a client-safe AgentdError: what happened in words an operator can act
 * on (out of memory, not answering, not reachable), never Redis's own text, which can hold
 * script hashes, Lua line numbers and key names (kept in `cause`, for the logs).
 * Must never: put the dependency's message into the error's message.
 */
import { AgentdError } from "../errors.ts";

export function redisError(err: unknown, what = "the event log (Redis)"): AgentdError {
  if (err instanceof AgentdError) return err;
  // A refused MULTI (EXECABORT) carries the reasons of its commands in previousErrors.
  const previous = (err as { previousErrors?: { message?: string }[] })?.previousErrors ?? [];
  const text = [String((err as Error)?.message ?? err), ...previous.map((e) => e?.message)].join(
    "\n",
  );
  const code = (err as { code?: unknown })?.code;
  const why = /^OOM\b/m.test(text)
    ? "is out of memory (maxmemory reached)"
    : /timed out/i.test(text)
      ? "did not answer in time"
      : /BUSY|LOADING|MASTERDOWN|READONLY/.test(text)
        ? "is not ready to serve"
        : typeof code === "string" || /closed|ECONN|EPIPE|ETIMEDOUT|reset/i.test(text)
          ? "cannot be reached"
          : "failed";
  return new AgentdError("EUNAVAILABLE", `${what} ${why}`, { cause: err });
}

/** `p`, with a Redis failure turned into redisError's client-safe error. */
export async function wrapRedis<T>(p: Promise<T>, what?: string): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw redisError(err, what);
  }
}
