/** Which token changes end a stream opened under a principal (principalChange). */
import assert from "node:assert/strict";
import { it } from "node:test";
import { Code } from "@connectrpc/connect";
import type { Principal, Role } from "../auth/tokens.ts";
import { principalChange } from "./token-revocation.ts";

const p = (tenantId: string, roles: Role[]): Principal => ({
  name: "t",
  tenantId,
  roles: new Set(roles),
});

it("removed: UNAUTHENTICATED; moved or fewer roles: PERMISSION_DENIED; same or more: goes on", () => {
  const before = p("acme", ["read", "submit"]);
  const gone = () => {
    throw new Error("unknown token");
  };
  assert.equal(principalChange(before, gone)?.code, Code.Unauthenticated);
  assert.equal(
    principalChange(before, () => p("globex", ["read", "submit"]))?.code,
    Code.PermissionDenied,
  );
  assert.match(
    principalChange(before, () => p("acme", ["read"]))?.message ?? "",
    /lost the 'submit' role/,
  );
  assert.equal(
    principalChange(before, () => p("acme", ["read", "submit"])),
    undefined,
  );
  assert.equal(
    principalChange(before, () => p("acme", ["read", "submit", "approve"])),
    undefined,
  );
});
