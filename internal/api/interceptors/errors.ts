/**
 * Maps whatever a handler throws (AgentdError or anything else) to a ConnectError, for
 * unary calls and for errors raised while a response stream is produced.
 */
import type { Interceptor } from "@connectrpc/connect";
import { type ErrorLogger, toConnectError } from "../errors.ts";

export function errorInterceptor(logError: ErrorLogger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      if (!res.stream) return res;
      // A plain iterator, not a generator: one promise per message on the fan-out path.
      const inner = res.message[Symbol.asyncIterator]();
      const message: typeof res.message = {
        [Symbol.asyncIterator]: () => ({
          next: () =>
            inner.next().catch((err: unknown) => {
              throw toConnectError(err, logError);
            }),
          return: (value?: unknown) =>
            inner.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined }),
        }),
      };
      return { ...res, message };
    } catch (err) {
      throw toConnectError(err, logError);
    }
  };
}
