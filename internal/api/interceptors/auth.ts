/**
 * Authenticates every agentd.v1 call and checks the method's role, before the request body
 * is read: a caller without the right token never makes the server buffer, decompress or
 * parse its (up to --max-request-bytes) message. grpc.health and grpc.reflection stay open
 * (probes and tooling need no token).
 */
import type { HandlerContext } from "@connectrpc/connect";
import type { Authenticator, Role } from "../../auth/tokens.ts";
import { AgentdError } from "../../errors.ts";
import { hasRole, kPrincipal } from "../context.ts";

/** Role each RunService method needs. */
export const METHOD_ROLES: Readonly<Record<string, Role>> = {
  CreateRun: "submit",
  UploadWorkspace: "submit",
  CancelRun: "submit",
  GetRun: "read",
  ListRuns: "read",
  StreamEvents: "read",
  WatchEvents: "read",
  ListApprovals: "read",
  GetArtifact: "read",
  ResolveApproval: "approve",
  OverrideReview: "approve",
  // The handler narrows it: a submit token deletes its tenant's runs, an admin any tenant's.
  DeleteRun: "submit",
  PurgeTenant: "admin",
  // The handler narrows it: a read token sees its tenant's changes, an admin every tenant's.
  ListPolicyChanges: "read",
  ApplyPolicyChange: "admin",
  RejectPolicyChange: "admin",
};

/** Methods any valid token may call, whatever its roles. */
export const OPEN_TO_ANY_TOKEN: ReadonlySet<string> = new Set(["WhoAmI"]);

/**
 * For the router's `requestGate` (connect runs it before it reads the body): sets the
 * caller's principal on the call, or throws EUNAUTHENTICATED / EPERMISSION.
 */
export function authGate(auth: Authenticator): (ctx: HandlerContext) => void {
  return (ctx) => {
    if (ctx.service.typeName.startsWith("grpc.")) return;
    const principal = auth.authenticate(ctx.requestHeader.get("authorization"));
    const role = METHOD_ROLES[ctx.method.name];
    const open = OPEN_TO_ANY_TOKEN.has(ctx.method.name);
    if (!open && (role === undefined || !hasRole(principal, role))) {
      throw new AgentdError(
        "EPERMISSION",
        `${ctx.method.name} needs the '${role ?? "admin"}' role; this token has ${[...principal.roles].join(", ") || "none"}`,
      );
    }
    ctx.values.set(kPrincipal, principal);
  };
}
