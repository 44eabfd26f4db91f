/**
 * Authenticates every agentd.v1 call and checks the method's role. grpc.health and
 * grpc.reflection stay open (probes and tooling need no token).
 */
import type { Interceptor } from "@connectrpc/connect";
import type { Authenticator, Role } from "../../auth/tokens.ts";
import { AgentdError } from "../../errors.ts";
import { hasRole, kPrincipal } from "../context.ts";

/** Role each RunService method needs. */
export const METHOD_ROLES: Readonly<Record<string, Role>> = {
  CreateRun: "submit",
  CancelRun: "submit",
  GetRun: "read",
  ListRuns: "read",
  StreamEvents: "read",
  ListApprovals: "read",
  GetArtifact: "read",
  ResolveApproval: "approve",
};

export function authInterceptor(auth: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName.startsWith("grpc.")) return next(req);
    const principal = auth.authenticate(req.header.get("authorization"));
    const role = METHOD_ROLES[req.method.name];
    if (role === undefined || !hasRole(principal, role)) {
      throw new AgentdError(
        "EPERMISSION",
        `${req.method.name} needs the '${role ?? "admin"}' role; this token has ${[...principal.roles].join(", ") || "none"}`,
      );
    }
    req.contextValues.set(kPrincipal, principal);
    return next(req);
  };
}
