/**
 * Makes the errors connect raises itself client-safe, where no interceptor can reach them:
 * connect decodes a unary request (in every protocol) before the interceptors run, and
 * answers a body it cannot decode with INTERNAL "parse binary: …", without an incident id.
 *
 * How: connect runs the router's `requestGate` with the call's context before it reads the
 * body, and every protocol handler calls `context.abort(error)` with the error it is about
 * to write, before writing it (connect-es 2.x: protocol-connect, protocol-grpc and
 * protocol-grpc-web handler-factory.ts). The gate listens for that abort and rewrites the
 * error in place with `clientSafe`: a decode failure becomes INVALID_ARGUMENT, an internal
 * error gets an incident id (logged with its cause), any other message is scrubbed. The
 * tests in internal/server/malformed-bodies.test.ts fail if connect stops doing either.
 * Never rejects a call: it only listens.
 */
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import { clientSafe, type ErrorLogger } from "../errors.ts";

/** The `requestGate` of the server's router (see createApp). */
export function edgeErrorGate(logError: ErrorLogger): (ctx: HandlerContext) => void {
  return (ctx) => {
    ctx.signal.addEventListener(
      "abort",
      () => {
        const reason: unknown = ctx.signal.reason;
        if (reason instanceof ConnectError) rewrite(reason, clientSafe(reason, logError));
      },
      { once: true },
    );
  };
}

/** Gives `target` the code, message and details of `safe` (connect serialises `target`). */
function rewrite(target: ConnectError, safe: ConnectError): void {
  if (target === safe) return;
  const t = target as { -readonly [K in keyof ConnectError]: ConnectError[K] };
  t.code = safe.code;
  t.rawMessage = safe.rawMessage;
  t.message = safe.message;
  t.details = safe.details;
}
