/**
 * Ends the open RunService streams (StreamEvents, WatchEvents, over Connect, gRPC and
 * gRPC-Web) of a token an auth reload changed: removed (UNAUTHENTICATED), moved to another
 * tenant, or left with fewer roles (PERMISSION_DENIED). A connect interceptor wraps each
 * streaming response: the stream ends with that status at once — the next message is not
 * waited for — so no event the token may no longer see is sent after the reload. Must
 * never: end a stream whose token is unchanged, or keep a stream after it ended.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { kPrincipal } from "../api/context.ts";
import type { Authenticator, Principal } from "../auth/tokens.ts";

/** Why a stream opened as `before` must end now that the token is `now`; undefined: it goes on. */
export function principalChange(
  before: Principal,
  now: () => Principal,
): { code: Code; message: string } | undefined {
  let p: Principal;
  try {
    p = now();
  } catch {
    return { code: Code.Unauthenticated, message: "the stream's token was revoked" };
  }
  if (p.tenantId !== before.tenantId)
    return { code: Code.PermissionDenied, message: "the stream's token moved to another tenant" };
  for (const role of before.roles)
    if (!p.roles.has(role))
      return { code: Code.PermissionDenied, message: `the stream's token lost the '${role}' role` };
  return undefined;
}

interface Watch {
  before: Principal;
  authorization: string | null;
  end: (err: ConnectError) => void;
}

export interface StreamRevocations {
  interceptor: Interceptor;
  /** Checks every open stream's token again; ends those that changed. Returns how many. */
  recheck(): number;
  readonly size: number;
}

export function createStreamRevocations(auth: Authenticator): StreamRevocations {
  const open = new Set<Watch>();
  const interceptor: Interceptor = (next) => async (req) => {
    const res = await next(req);
    const before = req.contextValues.get(kPrincipal);
    if (!res.stream || before === undefined) return res;
    return { ...res, message: watched(res.message, before, req.header.get("authorization")) };
  };

  async function* watched<T>(
    inner: AsyncIterable<T>,
    before: Principal,
    authorization: string | null,
  ): AsyncGenerator<T> {
    let end!: (err: ConnectError) => void;
    const ended = new Promise<ConnectError>((resolve) => {
      end = resolve;
    });
    const w: Watch = { before, authorization, end };
    open.add(w);
    const it = inner[Symbol.asyncIterator]();
    try {
      for (;;) {
        const r = await Promise.race([it.next(), ended]);
        if (r instanceof ConnectError) throw r;
        if (r.done === true) return;
        yield r.value;
      }
    } finally {
      open.delete(w);
      // The handler's loop is ended by the request's signal when the response closes.
      void Promise.resolve(it.return?.()).catch(() => undefined);
    }
  }

  return {
    interceptor,
    recheck() {
      let n = 0;
      for (const w of open) {
        const why = principalChange(w.before, () => auth.authenticate(w.authorization));
        if (why === undefined) continue;
        open.delete(w);
        w.end(new ConnectError(why.message, why.code));
        n++;
      }
      return n;
    },
    get size() {
      return open.size;
    },
  };
}
