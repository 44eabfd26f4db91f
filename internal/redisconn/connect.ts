/**
 * The connection factory: every Redis connection agentd makes starts here (the others are
 * this one's `duplicate()`, which keeps its user, password, TLS and sentinels). One
 * RedisTarget (redis-url.ts) says where; this module says how, and turns a refused login
 * or an unreachable server into an error that names the setting to fix.
 *
 * It must never log or put into an error the password: messages show the masked URL and
 * any library message passes maskSecret().
 */
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import { Redis, type RedisOptions } from "ioredis";
import { AgentdError } from "../errors.ts";
import { maskSecret, type RedisTarget } from "./redis-url.ts";

export interface RedisClientOptions {
  /** PEM file of the CA that signed the servers' certificates (rediss); default: Node's CAs. */
  tlsCaFile?: string;
  /** A command unanswered this long fails (ms); undefined: never. */
  commandTimeout?: number;
  enableAutoPipelining?: boolean;
  /** Default true: the caller calls connectRedis() and sees why a connection failed. */
  lazyConnect?: boolean;
}

function tlsOptions(target: RedisTarget, o: RedisClientOptions): ConnectionOptions | undefined {
  if (!target.tls) return undefined;
  const tls: ConnectionOptions = {};
  if (o.tlsCaFile !== undefined) {
    try {
      tls.ca = readFileSync(o.tlsCaFile);
    } catch (err) {
      throw new AgentdError(
        "EVALIDATION",
        `--redis-tls-ca ${o.tlsCaFile}: cannot read it (${(err as Error).message})`,
        { field: "redis_tls_ca", cause: err },
      );
    }
  }
  return tls;
}

/** The ioredis options for `target` (exported for tests and the bench). */
export function redisOptions(target: RedisTarget, o: RedisClientOptions = {}): RedisOptions {
  const tls = tlsOptions(target, o);
  const common: RedisOptions = {
    db: target.db,
    lazyConnect: o.lazyConnect ?? true,
    enableAutoPipelining: o.enableAutoPipelining ?? false,
    commandTimeout: o.commandTimeout,
  };
  if (target.username !== undefined) common.username = target.username;
  if (target.password !== undefined) common.password = target.password;
  if (target.kind === "standalone") {
    const node = target.nodes[0];
    return { ...common, host: node?.host, port: node?.port, ...(tls ? { tls } : {}) };
  }
  return {
    ...common,
    sentinels: target.nodes.map((n) => ({ host: n.host, port: n.port })),
    name: target.masterName,
    ...(target.sentinelPassword === undefined ? {} : { sentinelPassword: target.sentinelPassword }),
    ...(tls ? { tls, enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
    // Ask the sentinels again when the primary answers READONLY (it was demoted) and watch
    // their +switch-master messages: the new primary is found without waiting for a timeout.
    failoverDetector: true,
    reconnectOnError: (err) => (err.message.startsWith("READONLY") ? 2 : false),
  };
}

/** A client for `target`, not yet connected (call connectRedis). */
export function createRedisClient(target: RedisTarget, o: RedisClientOptions = {}): Redis {
  const client = new Redis(redisOptions(target, o));
  return client;
}

const AUTH_FAILURE = /WRONGPASS|NOAUTH|invalid username-password|invalid password|NOPERM/i;

/** Where the client goes, in words without the password. */
export function describeTarget(t: RedisTarget): string {
  const who = t.username === undefined ? "" : `user '${t.username}' at `;
  const where = t.nodes.map((n) => `${n.host}:${n.port}`).join(",");
  if (t.kind === "sentinel")
    return `${who}the primary '${t.masterName}' of the sentinels ${where}${t.tls ? " (TLS)" : ""}`;
  return `${who}${where}${t.tls ? " (TLS)" : ""}`;
}

const TIMED_OUT = Symbol("timed out");

/**
 * Connects and proves it with PING (a refused login only shows on the first command).
 * Errors: EUNAUTHENTICATED naming the user and AGENTD_REDIS_PASSWORD; EUNAVAILABLE with the
 * masked address — also after `timeoutMs` (default 15 s) without an answer: ioredis never
 * gives up on unreachable sentinels by itself, and a start must not hang in silence.
 * Either way the client is disconnected.
 */
export async function connectRedis(
  client: Redis,
  target: RedisTarget,
  timeoutMs = 15_000,
): Promise<void> {
  // connect() itself only says "Connection is closed": the reason (a refused login, an
  // untrusted certificate, unreachable sentinels) comes as an 'error' event before.
  let reason: unknown;
  const onError = (err: unknown): void => {
    reason = err;
  };
  client.on("error", onError);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(TIMED_OUT), timeoutMs);
  });
  const attempt = (async () => {
    await client.connect();
    await client.ping();
  })();
  attempt.catch(() => undefined); // after a timeout its rejection is no one's to handle
  try {
    await Promise.race([attempt, timeout]);
  } catch (err) {
    client.disconnect();
    if (err !== TIMED_OUT) throw connectError(reason ?? err, target);
    const last =
      reason === undefined ? "" : ` (last error: ${(reason as Error)?.message ?? reason})`;
    throw connectError(new Error(`no answer within ${timeoutMs} ms${last}`), target);
  } finally {
    clearTimeout(timer);
    client.off("error", onError);
  }
}

/** The error connectRedis throws for `err`, exported for callers that connect otherwise. */
export function connectError(err: unknown, target: RedisTarget): AgentdError {
  const msg = maskSecret(
    String((err as Error)?.message ?? err),
    target.password,
    target.sentinelPassword,
  );
  if (AUTH_FAILURE.test(msg))
    return new AgentdError(
      "EUNAUTHENTICATED",
      `Redis refused the login of ${describeTarget(target)}: ${msg} — check the user in --event-log (AGENTD_EVENT_LOG) and the password in AGENTD_REDIS_PASSWORD`,
      { field: "event_log" },
    );
  return new AgentdError(
    "EUNAVAILABLE",
    `cannot reach Redis at ${describeTarget(target)}: ${msg}`,
    {
      field: "event_log",
    },
  );
}
