/** Per-call values the interceptors and the server hand to the RPC handlers. */
import type { Http2Stream } from "node:http2";
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Principal, Role } from "../auth/tokens.ts";
import { AgentdError } from "../errors.ts";

/** The authenticated caller; set by the auth interceptor. */
export const kPrincipal = createContextKey<Principal | undefined>(undefined, {
  description: "authenticated principal",
});

/**
 * The call's HTTP/2 stream (set by the server for HTTP/2 requests). StreamEvents writes
 * pre-framed gRPC messages to it directly; see stream-events.ts.
 */
export const kHttp2Stream = createContextKey<Http2Stream | undefined>(undefined, {
  description: "the call's HTTP/2 stream",
});

/** The caller of this RPC; throws when the auth interceptor did not run (a wiring bug). */
export function principalOf(ctx: HandlerContext): Principal {
  const p = ctx.values.get(kPrincipal);
  if (p === undefined) throw new AgentdError("EUNAUTHENTICATED", "no authenticated principal");
  return p;
}

/** True when the principal holds `role` (admin holds every role). */
export function hasRole(p: Principal, role: Role): boolean {
  return p.roles.has(role) || p.roles.has("admin");
}
