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
      const inner = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* inner;
          } catch (err) {
            throw toConnectError(err, logError);
          }
        })(),
      };
    } catch (err) {
      throw toConnectError(err, logError);
    }
  };
}
