/**
 * RunDeletionStore on Redis: the event log's, the queue's and the idempotency keys of one run
 * (eventlog/redis-log-keys.ts, scheduler/redis-keys.ts). The check and the tombstone are one
 * Lua script: the run must have ended (`ended` in its meta, the rule the append script
 * enforces), hold no lease and have no queue record in a live state. An ended run takes no
 * append, no claim and no resume, so nothing can bring it back to life after the check; and
 * from the tombstone on, the append script refuses the run whoever writes (DELETED).
 *
 * Must never: write the tombstone of a live run, or forget the tombstone before the pieces
 * are gone (`deleting` lists the unfinished ones for any server to finish).
 */
import type { Redis } from "ioredis";
import { decodeTime } from "ulid";
import { FEED_MAX_LEN, RUN_ENDED_LUA } from "../eventlog/append-lua.ts";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { logKeys } from "../eventlog/redis-log-keys.ts";
import type { IdempotencyStore } from "../idempotency/port.ts";
import { schedulerKeys } from "../scheduler/redis-keys.ts";
import type {
  DeletionRecord,
  MarkResult,
  PurgeOptions,
  RunDeletionStore,
  RunTombstone,
} from "./port.ts";
import { ensureArtifactRefs } from "./redis-refs-backfill.ts";
import { REMOVING_MARK_MS, RedisUploadReceipts } from "./redis-upload-receipts.ts";
import { digestsOf } from "./run-digests.ts";

/**
 * KEYS: meta, events, lease, queue record, tombstone, deleting (zset), feed.
 * ARGV: tenant ("" = any), record JSON ("" = check only), now ms, run id, the notice (the
 * run.deleted event; published in the feed in the same step), the feed's cap.
 * Reply: {'DELETED', tombstone} | {'ABSENT'} | {'LIVE', state} | {'MARKED', tombstone}.
 * The notice is sealed by the caller from a check's tombstone: tenant, session and end
 * never change once a run ended, so the check's answer is the mark's.
 */
const MARK_LUA = `${RUN_ENDED_LUA}
local t = redis.call('GET', KEYS[5])
if t then return {'DELETED', t} end
local tenant = redis.call('HGET', KEYS[1], 'tenant')
if not tenant or tenant == '' or (ARGV[1] ~= '' and tenant ~= ARGV[1]) then return {'ABSENT'} end
local st = redis.call('HGET', KEYS[4], 'state')
local ended = run_ended(KEYS[1], KEYS[2])
if not ended then
  return {'LIVE', st or 'live'}
end
local lease = redis.call('GET', KEYS[3])
if lease then return {'LIVE', 'held by worker ' .. string.match(lease, '^(%S+)')} end
if st and st ~= 'ended' then return {'LIVE', 'still in the queue (' .. st .. ')'} end
local rec = {runId = ARGV[4], tenantId = tenant, sessionId = redis.call('HGET', KEYS[1], 'session') or '',
  ended = ended, by = '', reason = '', at = tonumber(ARGV[3])}
if ARGV[2] ~= '' then
  local r = cjson.decode(ARGV[2])
  rec.by = r.by
  rec.reason = r.reason
end
local v = cjson.encode(rec)
if ARGV[2] == '' then return {'MARKED', v} end
redis.call('SET', KEYS[5], v)
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[4])
redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*', 'r', ARGV[4], 't', tenant, 'a', 1, 'b', 1, 'e', ARGV[5])
return {'MARKED', v}
`;

/**
 * KEYS: a refs set. ARGV: tenant, key prefix. 1 when a member is the tenant's receipt or a
 * run of the tenant (its meta's tenant). Keys built from the prefix, as the append script's.
 */
const TENANT_REFS_LUA = `for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if m == 'u:' .. ARGV[1] then return 1 end
  if string.sub(m, 1, 2) ~= 'u:' and redis.call('HGET', ARGV[2] .. 'run:' .. m .. ':meta', 'tenant') == ARGV[1] then return 1 end
end
return 0`;

/** Clock difference allowed between a feed id (Redis' time) and an event's `ts` (its writer's). */
const FEED_SLACK_MS = 60_000;

/**
 * KEYS: a refs set, the blob's removing mark; ARGV: run id, the mark's ms. Answers the set's
 * size after removing the run (runs and live upload receipts); at 0 the blob is marked
 * "removing" in the same step, so a receipt taken from now on waits for the removal.
 */
const RELEASE_LUA = `redis.call('SREM', KEYS[1], ARGV[1])
local n = redis.call('SCARD', KEYS[1])
if n == 0 then redis.call('SET', KEYS[2], '1', 'PX', ARGV[2]) end
return n`;

export interface RedisRunDeletionOptions {
  client: Redis;
  /** Prefix of every key; the log's and the queue's. Default "agentd:". */
  prefix?: string;
  idempotency?: IdempotencyStore;
  /**
   * Most feed entries one deletion looks through for the run's own (default
   * DEFAULT_FEED_SCAN_LIMIT; 0: none). Bounds a deletion's cost on a busy feed; entries not
   * reached stay as pointers to nothing (readers skip them) until the feed is trimmed.
   */
  feedScanLimit?: number;
}

/** Feed entries a deletion looks through at most: the run's lifetime on a quiet feed. */
export const DEFAULT_FEED_SCAN_LIMIT = 5_000;

type ScriptClient = {
  agentdMarkDeleted: (...args: (string | number)[]) => Promise<string[]>;
  agentdReleaseRef: (key: string, mark: string, runId: string, ms: number) => Promise<number>;
  agentdTenantRefs: (key: string, tenant: string, prefix: string) => Promise<number>;
};

export class RedisRunDeletion implements RunDeletionStore {
  readonly #client: Redis;
  readonly #log: ReturnType<typeof logKeys>;
  readonly #queue: ReturnType<typeof schedulerKeys>;
  readonly #idem: IdempotencyStore | undefined;
  readonly #scripts: ScriptClient;
  readonly #prefix: string;
  readonly #feedScanLimit: number;
  #refsIndexed = false;
  readonly receipts: RedisUploadReceipts;

  constructor(opts: RedisRunDeletionOptions) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#feedScanLimit = opts.feedScanLimit ?? DEFAULT_FEED_SCAN_LIMIT;
    this.#log = logKeys(opts.prefix ?? "agentd:");
    this.#queue = schedulerKeys(opts.prefix ?? "agentd:");
    this.#idem = opts.idempotency;
    opts.client.defineCommand("agentdMarkDeleted", { numberOfKeys: 7, lua: MARK_LUA });
    opts.client.defineCommand("agentdReleaseRef", { numberOfKeys: 2, lua: RELEASE_LUA });
    opts.client.defineCommand("agentdTenantRefs", { numberOfKeys: 1, lua: TENANT_REFS_LUA });
    this.#scripts = opts.client as unknown as ScriptClient;
    this.receipts = new RedisUploadReceipts(opts.client, this.#prefix, () => this.#ensureRefs());
  }

  async #ensureRefs(): Promise<void> {
    if (this.#refsIndexed) return;
    await ensureArtifactRefs(this.#client, this.#prefix);
    this.#refsIndexed = true;
  }

  async #mark(
    runId: string,
    tenantId: string | undefined,
    rec: string,
    at: number,
    notice: string,
  ): Promise<MarkResult> {
    const reply = await wrapRedis(
      this.#scripts.agentdMarkDeleted(
        this.#log.meta(runId),
        this.#log.stream(runId),
        this.#queue.lease(runId),
        this.#queue.record(runId),
        this.#log.tombstone(runId),
        this.#log.deleting,
        this.#log.feed,
        tenantId ?? "",
        rec,
        at,
        runId,
        notice,
        FEED_MAX_LEN,
      ),
    );
    const [kind, value] = reply;
    if (kind === "DELETED") return { kind: "already", tombstone: parse(value) };
    if (kind === "ABSENT") return { kind: "absent" };
    if (kind === "LIVE") return { kind: "live", state: liveState(value ?? "") };
    return { kind: "marked", tombstone: parse(value) };
  }

  async mark(
    runId: string,
    tenantId: string | undefined,
    rec: DeletionRecord,
    notice: (t: RunTombstone) => string,
  ): Promise<MarkResult> {
    const probe = await this.check(runId, tenantId);
    if (probe.kind !== "marked") return probe;
    const t = { ...probe.tombstone, by: rec.by, reason: rec.reason, at: rec.at };
    const record = JSON.stringify({ by: rec.by, reason: rec.reason });
    return this.#mark(runId, tenantId, record, rec.at, notice(t));
  }

  check(runId: string, tenantId: string | undefined): Promise<MarkResult> {
    return this.#mark(runId, tenantId, "", Date.now(), "");
  }

  async tombstone(runId: string): Promise<RunTombstone | undefined> {
    const v = await wrapRedis(this.#client.get(this.#log.tombstone(runId)));
    return v === null ? undefined : parse(v);
  }

  async pending(limit: number): Promise<string[]> {
    return wrapRedis(this.#client.zrange(this.#log.deleting, "0", String(limit - 1)));
  }

  async digests(runId: string): Promise<string[]> {
    const out = new Set<string>();
    let from = "-";
    for (;;) {
      const rows = (await wrapRedis(
        this.#client.call("XRANGE", this.#log.stream(runId), from, "+", "COUNT", 500),
      )) as [string, string[]][];
      for (const [, fields] of rows) for (const d of digestsOf(fields[1] ?? "")) out.add(d);
      if (rows.length < 500) return [...out];
      from = `(${rows[rows.length - 1]?.[0]}`;
    }
  }

  async releaseArtifacts(runId: string, digests: readonly string[]): Promise<string[]> {
    await this.#ensureRefs();
    const free: string[] = [];
    for (const d of digests) {
      const left = await wrapRedis(
        this.#scripts.agentdReleaseRef(
          this.#log.artifactRefs(d),
          this.#log.artifactRemoving(d),
          runId,
          REMOVING_MARK_MS,
        ),
      );
      if (Number(left) === 0) free.push(d);
    }
    return free;
  }

  async tenantReferences(tenantId: string, digest: string): Promise<boolean> {
    await this.#ensureRefs();
    const r = await wrapRedis(
      this.#scripts.agentdTenantRefs(this.#log.artifactRefs(digest), tenantId, this.#prefix),
    );
    return Number(r) === 1;
  }

  async forgetIdempotency(t: RunTombstone): Promise<void> {
    await this.#idem?.forgetRun(t.tenantId, t.runId);
  }

  async purge(t: RunTombstone, opts: PurgeOptions = {}): Promise<void> {
    if (opts.feedEntries !== false) await this.#dropFeedEntries(t);
    const r = t.runId;
    const rec = await wrapRedis(this.#client.hmget(this.#queue.record(r), "member", "session"));
    const member = rec[0];
    const m = this.#client.multi();
    m.del(
      this.#log.stream(r),
      this.#log.meta(r),
      this.#log.nameKey(r),
      this.#queue.lease(r),
      this.#queue.record(r),
    );
    m.zrem(this.#log.tenantRuns(t.tenantId), r);
    m.zrem(this.#log.endedRuns(t.tenantId), r); // the retention sweeper's index
    m.zrem(this.#log.sessionRuns(t.tenantId, t.sessionId), r);
    m.lrem(this.#queue.session(t.tenantId, t.sessionId), 0, r);
    if (member) m.zrem(this.#queue.queued, member).zrem(this.#queue.paused, member);
    await wrapRedis(m.exec());
  }

  /**
   * Removes the run's entries from the log-wide feed (run id, tenant, seq range: pointers to
   * the deleted events), searching only the run's lifetime: the feed's ids are Redis times,
   * from its first event's time to its last one's, with FEED_SLACK_MS either side for the
   * clocks of the servers and workers that wrote them. Readers past a removed entry go on
   * from the next one (api/tenant-feed.ts). Its `run.deleted` notice stays.
   */
  async #dropFeedEntries(t: RunTombstone): Promise<void> {
    if (this.#feedScanLimit <= 0) return;
    const [from, to] = await this.#lifetime(t);
    let start = `${Math.max(0, from - FEED_SLACK_MS)}-0`;
    const end = `${to + FEED_SLACK_MS}-${Number.MAX_SAFE_INTEGER}`;
    for (let seen = 0; seen < this.#feedScanLimit; ) {
      const count = Math.min(1000, this.#feedScanLimit - seen);
      const rows = (await wrapRedis(
        this.#client.call("XRANGE", this.#log.feed, start, end, "COUNT", count),
      )) as [string, string[]][];
      seen += rows.length;
      const mine = rows
        .filter(([, f]) => f[0] === "r" && f[1] === t.runId && f.length <= 8)
        .map(([id]) => id);
      if (mine.length > 0) await wrapRedis(this.#client.xdel(this.#log.feed, ...mine));
      if (rows.length < count) return;
      start = `(${rows[rows.length - 1]?.[0]}`;
    }
  }

  /** The run's first and last event times (ms); from its id and tombstone once they are gone. */
  async #lifetime(t: RunTombstone): Promise<[number, number]> {
    const stream = this.#log.stream(t.runId);
    const [first, last] = (await Promise.all([
      wrapRedis(this.#client.call("XRANGE", stream, "-", "+", "COUNT", 1)),
      wrapRedis(this.#client.call("XREVRANGE", stream, "+", "-", "COUNT", 1)),
    ])) as [[string, string[]][], [string, string[]][]];
    const tsOf = (row: [string, string[]] | undefined): number | undefined => {
      const m = /"ts":"([^"]+)"/.exec(row?.[1][1] ?? "");
      const ms = m === null ? Number.NaN : Date.parse(m[1] as string);
      return Number.isFinite(ms) ? ms : undefined;
    };
    return [tsOf(first[0]) ?? decodeTime(t.runId), tsOf(last[0]) ?? t.at];
  }

  async finish(t: RunTombstone, keepMs: number): Promise<void> {
    await wrapRedis(
      this.#client
        .multi()
        .pexpire(this.#log.tombstone(t.runId), keepMs)
        .zrem(this.#log.deleting, t.runId)
        .exec(),
    );
  }
}

function parse(v: string | undefined): RunTombstone {
  const o = JSON.parse(v ?? "{}") as RunTombstone;
  return {
    runId: String(o.runId),
    tenantId: String(o.tenantId),
    sessionId: String(o.sessionId ?? ""),
    ended: String(o.ended ?? ""),
    by: String(o.by ?? ""),
    reason: String(o.reason ?? ""),
    at: Number(o.at),
  };
}

/** The queue record's state, as a person reads it. */
function liveState(s: string): string {
  switch (s) {
    case "paused":
      return "paused (waiting for an approval)";
    case "claimed":
      return "running";
    case "ready":
    case "tenant":
    case "session":
    case "waiting":
      return "queued";
    default:
      return s === "" || s === "live" ? "live" : s;
  }
}
