/**
 * The long-lived reads (StreamEvents, WatchEvents, the SSE streams) still open, with the
 * token each was opened with. A token is checked when a call starts; a stream can outlive
 * that check by hours. When the auth file changes (SIGHUP, an edit), every open stream's
 * token is checked again, and a stream whose token is gone or lost the `read` role is cut
 * at once: its client reconnects and gets UNAUTHENTICATED. Must never: keep a reference to
 * a stream after it closed, or cut a stream whose token is still good.
 */
import http2 from "node:http2";
import { hasRole } from "../api/context.ts";
import type { Authenticator } from "../auth/tokens.ts";
import type { RequestHandler } from "./dual-protocol.ts";

type Req = Parameters<RequestHandler>[0];
type Res = Parameters<RequestHandler>[1];

/** The paths of calls that stay open (every protocol: Connect, gRPC, gRPC-Web, SSE). */
const STREAMING =
  /^\/(?:agentd\.v1\.RunService\/(?:StreamEvents|WatchEvents)|v1\/events|v1\/runs\/[^/]+\/events)$/;

export interface LiveStreams {
  /** Tracks the request when it is a stream; no-op otherwise. */
  track(req: Req, res: Res, path: string): void;
  /** Checks every open stream's token again; cuts those that no longer read. Returns how many. */
  recheck(): number;
  readonly size: number;
}

export function createLiveStreams(auth: Authenticator): LiveStreams {
  const open = new Map<Res, { authorization: string | undefined; cut: () => void }>();
  return {
    track(req, res, path) {
      if (!STREAMING.test(path)) return;
      const authorization = req.headers.authorization;
      open.set(res, { authorization, cut: () => cut(res) });
      res.once("close", () => open.delete(res));
    },
    recheck() {
      let n = 0;
      for (const [res, s] of open) {
        let ok = false;
        try {
          ok = hasRole(auth.authenticate(s.authorization), "read");
        } catch {
          ok = false;
        }
        if (ok) continue;
        open.delete(res);
        s.cut();
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
