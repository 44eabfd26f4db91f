/**
 * Ends the open RunService streams (StreamEvents, WatchEvents, UploadWorkspace, over
 * Connect, gRPC and gRPC-Web) of a token an auth reload changed: removed
 * (UNAUTHENTICATED), moved to another tenant, or left with fewer roles
 * (PERMISSION_DENIED). A connect interceptor watches each streaming call from before its
 * request message is read until its response ended: the call ends with that status at once
 * — the next message (the client's or the handler's) is not waited for — and the
 * handler's signal aborts with it (an upload stops its unpack and stores nothing), so
 * nothing the token may no longer see is sent, and nothing it may no longer do goes on,
 * after the reload. Must never: end a stream whose token is unchanged, or keep a stream
 * after it ended.
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
  const changed = (w: Watch) => principalChange(w.before, () => auth.authenticate(w.authorization));

  // Every streaming call (server, client or both ways) is watched from the moment the
  // interceptor sees it — before its request message is read and before its handler runs —
  // until its response ended: a reload at any point of its life ends it with the status.
  const interceptor: Interceptor = (next) => async (req) => {
    const before = req.contextValues.get(kPrincipal);
    if (!req.stream || before === undefined) return next(req);
    // `revoked` says the reload's status to the races below; `ac` is the handler's signal
    // (the call's own end, or the reload's status: an upload stops its unpack with it).
    const revoked = new AbortController();
    const ac = new AbortController();
    const end = (err: ConnectError): void => {
      revoked.abort(err);
      ac.abort(err);
    };
    const w: Watch = { before, authorization: req.header.get("authorization"), end };
    const forget = (): void => {
      open.delete(w);
    };
    open.add(w);
    // The handler's signal: the call's own (deadline, client gone), or the reload's status.
    // Forwarded by hand: a signal of AbortSignal.any() nobody holds can be collected with
    // its listeners before it fires.
    const onCallEnd = (): void => {
      forget();
      ac.abort(req.signal.reason);
    };
    if (req.signal.aborted) onCallEnd();
    else req.signal.addEventListener("abort", onCallEnd, { once: true });
    // A reload between the call's token check and now is not missed.
    const why = changed(w);
    if (why !== undefined) w.end(new ConnectError(why.message, why.code));
    try {
      const res = await unlessAborted(
        next({ ...req, signal: ac.signal, message: raced(req.message, revoked.signal) }),
        revoked.signal,
      );
      if (!res.stream) {
        forget();
        return res;
      }
      return { ...res, message: watched(res.message, revoked.signal, forget) };
    } catch (err) {
      forget();
      throw err;
    }
  };

  return {
    interceptor,
    recheck() {
      let n = 0;
      for (const w of open) {
        const why = changed(w);
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

/**
 * `p`, or `signal`'s reason as soon as it aborts. A listener taken off once `p` settles,
 * not a Promise.race against a promise that lives as long as the call: each such race
 * leaves a reaction on the long-lived promise that keeps what `p` resolved with (an
 * upload's every chunk) alive until the call ends.
 */
function unlessAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** `inner`'s items, until `signal` aborts: then its reason, at once (the next item is not waited for). */
async function* raced<T>(inner: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T> {
  const it = inner[Symbol.asyncIterator]();
  let done = false;
  try {
    for (;;) {
      const r = await unlessAborted(it.next(), signal);
      if (r.done === true) {
        done = true;
        return;
      }
      yield r.value;
    }
  } finally {
    // The handler's loop is ended by the call's signal when the response closes.
    if (!done) void Promise.resolve(it.return?.()).catch(() => undefined);
  }
}

/** The response's messages, raced against `signal`; `forget` once it is over, however. */
async function* watched<T>(
  inner: AsyncIterable<T>,
  signal: AbortSignal,
  forget: () => void,
): AsyncGenerator<T> {
  try {
    yield* raced(inner, signal);
  } finally {
    forget();
  }
}
