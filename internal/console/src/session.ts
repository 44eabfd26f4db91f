/** Who is signed in: the API client and what WhoAmI said of the token. */
import { Code, ConnectError } from "@connectrpc/connect";
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Api } from "./api.ts";

export interface Session {
  api: Api;
  tenantId: string;
  principal: string;
  roles: readonly string[];
  /** The token was refused (expired or revoked): back to the token form. */
  signOut: (message?: string) => void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (s === null) throw new Error("useSession outside a signed-in page");
  return s;
}

/** The server refused the token itself (not the call): nothing but a new token helps. */
export function refused(err: unknown): boolean {
  return (
    err instanceof ConnectError &&
    (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied)
  );
}

export function canApprove(s: Session): boolean {
  return s.roles.includes("approve") || s.roles.includes("admin");
}
