/**
 * The one place a Redis address is read: `--event-log` (AGENTD_EVENT_LOG) in one of three
 * forms, and the credentials beside it, become a RedisTarget every connection agentd makes
 * is built from (see connect.ts).
 *
 *   redis://[user[:pass]@]host[:port][/db]                 one server
 *   rediss://[user[:pass]@]host[:port][/db]                one server over TLS
 *   redis+sentinel://[user[:pass]@]h1:26379,h2:26379/master[/db]
 *   rediss+sentinel://…                                    the same over TLS (sentinels too)
 *
 * user:pass in the URL are the data nodes' ACL user and password; the password belongs in
 * AGENTD_REDIS_PASSWORD instead (an environment variable, never on a command line). The
 * sentinels' own password, when they have one, is AGENTD_REDIS_SENTINEL_PASSWORD.
 *
 * It must never put a password in an error message: every message shows maskRedisUrl().
 */
import { AgentdError } from "../errors.ts";

export interface RedisNode {
  host: string;
  port: number;
}

/** Where and how to reach Redis: one server or a Sentinel-watched primary. */
export interface RedisTarget {
  kind: "standalone" | "sentinel";
  /** The server (standalone) or the sentinels (sentinel). */
  nodes: RedisNode[];
  /** The master name Sentinel knows the primary by (sentinel only). */
  masterName?: string;
  db: number;
  tls: boolean;
  username?: string;
  password?: string;
  sentinelPassword?: string;
}

export interface RedisCredentials {
  /** AGENTD_REDIS_PASSWORD: overrides a password in the URL. */
  password?: string;
  /** AGENTD_REDIS_SENTINEL_PASSWORD: the sentinels' requirepass, if any. */
  sentinelPassword?: string;
}

const SCHEMES: Record<string, { kind: RedisTarget["kind"]; tls: boolean; port: number }> = {
  "redis:": { kind: "standalone", tls: false, port: 6379 },
  "rediss:": { kind: "standalone", tls: true, port: 6379 },
  "redis+sentinel:": { kind: "sentinel", tls: false, port: 26379 },
  "rediss+sentinel:": { kind: "sentinel", tls: true, port: 26379 },
};

const FIELD = "event_log";

function bad(url: string, what: string): AgentdError {
  return new AgentdError("EVALIDATION", `--event-log ${maskRedisUrl(url)}: ${what}`, {
    field: FIELD,
  });
}

/** True when `url` names Redis (any of the four schemes). */
export function isRedisUrl(url: string): boolean {
  return /^rediss?(\+sentinel)?:\/\//.test(url);
}

/**
 * The URL with its password replaced by `***` — for every log line and error. Works on
 * URLs it cannot parse too (anything between `:` and `@` after the scheme is hidden).
 */
export function maskRedisUrl(url: string): string {
  return url.replace(/^([a-z+]+:\/\/[^:@/]*):.*@/i, "$1:***@");
}

/** Replaces every occurrence of `secret` in `text` (an error from a library) with `***`. */
export function maskSecret(text: string, ...secrets: (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s !== undefined && s.length > 0) out = out.split(s).join("***");
  return out;
}

function parseNode(url: string, s: string, defPort: number): RedisNode {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/.exec(s);
  if (m === null) throw bad(url, `'${s}' is not HOST[:PORT]`);
  const port = m[2] === undefined ? defPort : Number(m[2]);
  if (port < 1 || port > 65535) throw bad(url, `port ${port} must be 1-65535`);
  return { host: (m[1] ?? "").replace(/^\[|\]$/g, ""), port };
}

function parseDb(url: string, s: string | undefined): number {
  if (s === undefined || s === "") return 0;
  if (!/^\d{1,2}$/.test(s)) throw bad(url, `database '${s}' must be a number 0-15`);
  const db = Number(s);
  if (db > 15) throw bad(url, `database ${db} must be 0-15`);
  return db;
}

function decode(url: string, s: string, what: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw bad(url, `the ${what} is not valid percent-encoding`);
  }
}

/** Parses a Redis URL of any of the four forms; errors name --event-log and hide passwords. */
export function parseRedisUrl(url: string, creds: RedisCredentials = {}): RedisTarget {
  const m = /^([a-z+]+:)\/\/(?:([^@/]*)@)?([^/?#]*)(\/[^?#]*)?([?#].*)?$/i.exec(url);
  const scheme = SCHEMES[(m?.[1] ?? "").toLowerCase()];
  if (m === null || scheme === undefined)
    throw bad(url, "must start with redis://, rediss://, redis+sentinel:// or rediss+sentinel://");
  if (m[5] !== undefined) throw bad(url, "takes no query or fragment (options are flags)");
  const [, , auth, hosts = "", path = ""] = m;
  if (hosts === "") throw bad(url, "names no host");
  const parts = hosts.split(",");
  if (scheme.kind === "standalone" && parts.length > 1)
    throw bad(url, "names several hosts: use redis+sentinel:// for a Sentinel-watched primary");
  if (parts.length > 16) throw bad(url, "names more than 16 sentinels");
  const nodes = parts.map((p) => parseNode(url, p, scheme.port));
  const segs = path.split("/").slice(1);
  let masterName: string | undefined;
  if (scheme.kind === "sentinel") {
    masterName = segs.shift();
    if (masterName === undefined || !/^[A-Za-z0-9._-]{1,64}$/.test(masterName))
      throw bad(url, "needs the master name after the hosts: redis+sentinel://h1,h2/mymaster");
  }
  if (segs.length > 1) throw bad(url, "has a path with too many parts");
  const db = parseDb(url, segs[0]);
  const target: RedisTarget = { kind: scheme.kind, nodes, db, tls: scheme.tls };
  if (masterName !== undefined) target.masterName = masterName;
  if (auth !== undefined) {
    const i = auth.indexOf(":");
    const user = decode(url, i < 0 ? auth : auth.slice(0, i), "user");
    if (user !== "") target.username = user;
    if (i >= 0) target.password = decode(url, auth.slice(i + 1), "password");
  }
  if (creds.password !== undefined && creds.password !== "") target.password = creds.password;
  if (creds.sentinelPassword !== undefined && creds.sentinelPassword !== "")
    target.sentinelPassword = creds.sentinelPassword;
  return target;
}
