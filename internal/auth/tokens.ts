/**
 * Bearer-token authentication. Tokens are never stored: the auth file holds their sha256
 * hashes, each mapped to a tenant and roles. Lookup hashes the presented token and compares
 * it with every entry in constant time (no early exit, no timing hint of a near match).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseDocument } from "yaml";
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import {
  NO_TENANT_CONFIG,
  type TenantConfig,
  TenantConfigSchema,
  type TokenRate,
  TokenRateSchema,
  toTenantConfig,
  toTokenRate,
} from "./tenant-config.ts";

export const ROLES = ["submit", "read", "approve", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** Who is calling: from a token, or the single local principal when auth is off. */
export interface Principal {
  /** A name for logs and events ("submitted_by"); never the token. */
  name: string;
  tenantId: string;
  roles: ReadonlySet<Role>;
  /** Which token (a short hash of its sha256; never the token): rate limits key on it. */
  tokenId?: string;
  /** The token's API rate from the auth file; none: not limited per token. */
  rate?: TokenRate;
}

export const TENANT_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

const AuthFileSchema = z
  .object({
    tokens: z
      .array(
        z
          .object({
            sha256: z
              .string()
              .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex characters (sha256 of the token)"),
            tenant: z.string().regex(TENANT_RE, "must match [a-z0-9][a-z0-9_-]{0,62}"),
            roles: z.array(z.enum(ROLES)).min(1),
            name: z.string().min(1).max(128).optional(),
            rate: TokenRateSchema.optional(),
          })
          .strict(),
      )
      .min(1, "at least one token is needed"),
    tenants: z
      .record(
        z.string().regex(TENANT_RE, "must match [a-z0-9][a-z0-9_-]{0,62}"),
        TenantConfigSchema,
      )
      .optional(),
  })
  .strict();

export interface TokenEntry {
  digest: Buffer;
  principal: Principal;
}

/** A parsed auth file: its tokens, and what it says about each tenant. */
export interface AuthConfig {
  tokens: TokenEntry[];
  tenants: ReadonlyMap<string, TenantConfig>;
}

/** Parses an auth file's YAML text; errors name the source, line and field. */
export function parseAuthConfig(text: string, source: string): TokenEntry[] {
  return parseAuthFile(text, source).tokens;
}

/**
 * Parses an auth file's YAML text, tenants included; errors name the source, line and
 * field. Relative policy paths resolve against `baseDir` (the file's directory).
 */
export function parseAuthFile(text: string, source: string, baseDir = process.cwd()): AuthConfig {
  const doc = parseDocument(text, { prettyErrors: false });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const line = e?.linePos?.[0]?.line ?? 0;
    throw new AgentdError("EVALIDATION", `${source}:${line}: ${e?.message ?? "invalid YAML"}`);
  }
  const parsed = AuthFileSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path ?? [];
    const node = doc.getIn(path, true) as { range?: [number, number] } | undefined;
    const line = node?.range ? lineOf(text, node.range[0]) : 0;
    const field = path.join(".");
    throw new AgentdError(
      "EVALIDATION",
      `${source}:${line}: ${field || "(root)"}: ${issue?.message ?? "invalid"}`,
      { field },
    );
  }
  const tokens = parsed.data.tokens.map((t, i) => ({
    digest: Buffer.from(t.sha256.toLowerCase(), "hex"),
    principal: {
      name: t.name ?? `${t.tenant}#${i}`,
      tenantId: t.tenant,
      roles: new Set(t.roles),
      tokenId: createHash("sha256").update(t.sha256.toLowerCase()).digest("hex").slice(0, 12),
      ...(t.rate !== undefined ? { rate: toTokenRate(t.rate) } : {}),
    },
  }));
  const tenants = new Map<string, TenantConfig>();
  for (const [id, raw] of Object.entries(parsed.data.tenants ?? {})) {
    tenants.set(
      id,
      toTenantConfig(raw, (p) => resolve(baseDir, p)),
    );
  }
  return { tokens, tenants };
}

/** Reads and parses an auth file. */
export function loadAuthFile(path: string): AuthConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new AgentdError("EVALIDATION", `auth file ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return parseAuthFile(text, path, dirname(resolve(path)));
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** sha256 hex of a token: what goes in the auth file. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

export interface Authenticator {
  /** The principal of an `Authorization` header value; throws EUNAUTHENTICATED. */
  authenticate(authorization: string | null | undefined): Principal;
  /** What the auth file says about a tenant (its policy, retention, limits); {} if nothing. */
  tenantConfig(tenantId: string): TenantConfig;
  /** The tenants the auth file names (its tokens' and its `tenants:` map's). */
  tenantIds?(): readonly string[];
  /** The `tokenId` of every token the auth file holds. */
  tokenIds?(): ReadonlySet<string>;
}

/** Authenticates bearer tokens against hashed entries. */
export function createTokenAuthenticator(
  entries: readonly TokenEntry[],
  tenants: ReadonlyMap<string, TenantConfig> = new Map(),
): Authenticator {
  const tenantIds = [...new Set([...entries.map((e) => e.principal.tenantId), ...tenants.keys()])];
  const tokenIds = new Set(entries.flatMap((e) => e.principal.tokenId ?? []));
  return {
    tenantConfig: (tenantId) => tenants.get(tenantId) ?? NO_TENANT_CONFIG,
    tenantIds: () => tenantIds,
    tokenIds: () => tokenIds,
    authenticate(authorization) {
      const m = /^Bearer[ \t]+(\S{1,4096})[ \t]*$/i.exec(authorization ?? "");
      if (m === null) {
        throw new AgentdError(
          "EUNAUTHENTICATED",
          authorization
            ? "malformed Authorization header: expected 'Bearer <token>'"
            : "missing bearer token",
        );
      }
      const presented = createHash("sha256")
        .update(m[1] as string, "utf8")
        .digest();
      let found: Principal | undefined;
      for (const e of entries) {
        // Every entry is compared, whatever matched before.
        if (timingSafeEqual(presented, e.digest) && found === undefined) found = e.principal;
      }
      if (found === undefined) throw new AgentdError("EUNAUTHENTICATED", "invalid bearer token");
      return found;
    },
  };
}

/** No authentication (agentd dev on a laptop): every caller is this one principal. */
export function createOpenAuthenticator(tenantId = "default"): Authenticator {
  const principal: Principal = { name: "local", tenantId, roles: new Set(ROLES) };
  return {
    authenticate: () => principal,
    tenantConfig: () => NO_TENANT_CONFIG,
    tenantIds: () => [],
  };
}
