/**
 * The long-lived reads (StreamEvents, WatchEvents, the SSE streams) still open, with the
 * token each was opened with. A token is checked when a call starts; a stream can outlive
 * that check by hours. When the auth file changes (SIGHUP, an edit), every open stream's
 * token is checked again, and a stream whose token is gone, moved to another tenant or lost
 * a role is cut: an SSE stream at once (its client reconnects and gets 401); a RunService
 * stream is ended with its status by token-revocation.ts, and cut here only if it is still
 * open a moment later (a backstop). Must never: keep a reference to a stream after it
 * closed, or cut a stream whose token is still good.
 */
import http2 from "node:http2";
import type { Authenticator, Principal } from "../auth/tokens.ts";
import type { RequestHandler } from "./dual-protocol.ts";
import { principalChange } from "./token-revocation.ts";

type Req = Parameters<RequestHandler>[0];
type Res = Parameters<RequestHandler>[1];

/** The paths of calls that stay open (every protocol: Connect, gRPC, gRPC-Web, SSE). */
const STREAMING =
  /^\/(?:agentd\.v1\.RunService\/(?:StreamEvents|WatchEvents)|v1\/events|v1\/runs\/[^/]+\/events)$/;
const RPC = /^\/agentd\.v1\.RunService\//;
/**
 * How long an RPC stream whose token changed may take to end with its status (the
 * interceptor ends it at once) before it is cut without one.
 */
const BACKSTOP_MS = 5_000;

export interface LiveStreams {
  /** Tracks the request when it is a stream; no-op otherwise. */
  track(req: Req, res: Res, path: string): void;
  /** Checks every open stream's token again; cuts those that no longer read. Returns how many. */
  recheck(): number;
  readonly size: number;
}

export function createLiveStreams(auth: Authenticator): LiveStreams {
  const open = new Map<
    Res,
    { authorization: string | undefined; before: Principal | undefined; rpc: boolean }
  >();
  const closed = new WeakSet<Res>();
  return {
    track(req, res, path) {
      if (!STREAMING.test(path)) return;
      const authorization = req.headers.authorization;
      let before: Principal | undefined;
      try {
        before = auth.authenticate(authorization);
      } catch {
        before = undefined; // refused by the call's own check
      }
      open.set(res, { authorization, before, rpc: RPC.test(path) });
      res.once("close", () => {
        open.delete(res);
        closed.add(res);
      });
    },
    recheck() {
      let n = 0;
      for (const [res, s] of open) {
        const why =
          s.before === undefined
            ? { code: 0, message: "unauthenticated" }
            : principalChange(s.before, () => auth.authenticate(s.authorization));
        if (why === undefined) continue;
        open.delete(res);
        if (s.rpc) setTimeout(() => closed.has(res) || cut(res), BACKSTOP_MS).unref();
        else cut(res);
        n++;
      }
      return n;
    },
    get size() {
      return open.size;
    },
  };
}

/** Ends the stream without a status (the client sees a reset and reconnects). */
function cut(res: Res): void {
  if ("stream" in res && res.stream !== undefined) res.stream.close(http2.constants.NGHTTP2_CANCEL);
  else (res as { destroy(): void }).destroy();
}
