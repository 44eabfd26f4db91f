/**
 * EventLog on Redis Streams: one stream per run, entry id `0-<seq>`, so Redis itself
 * refuses an entry that is not after the last one. All writes go through one Lua script
 * (append-lua.ts) that checks the fencing token, checks the head (compare-and-append),
 * XADDs and updates the run's head and indexes atomically.
 *
 * Redis' Lua has no SHA-256, so the writer seals events (seq, prevHash, hash) against the
 * head it knows and the script refuses the commit if the head moved; see append-batcher.ts.
 * The script also records a run's end (meta field `ended`) with its terminal event and
 * refuses every later commit (ENDED → EENDED), in the same atomic step.
 * Live tail: one blocking connection per followed run, fanned out to all local subscribers.
 * Never trims a run's stream.
 */
import { createHash, randomBytes } from "node:crypto";
import { Command, type Redis } from "ioredis";
import { AgentdError } from "../errors.ts";
import { ReplicaWait, type ReplicaWaitOptions } from "../redisconn/replica-wait.ts";
import { AppendBatcher, type Commit, type CommitOutcome, type Head } from "./append-batcher.ts";
import { APPEND_LUA, FEED_MAX_LEN } from "./append-lua.ts";
import { LoggedEvent } from "./event-codec.ts";
import { followLog, followLogBatches, type LiveFeed } from "./follow.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import type {
  AppendRequest,
  EventLog,
  FeedEntry,
  ListRunIdsQuery,
  RunHead,
  RunIdPage,
} from "./port.ts";
import { redisError, wrapRedis } from "./redis-error.ts";
import { type LogKeys, logKeys } from "./redis-log-keys.ts";

export interface RedisEventLogOptions {
  /** Connection for commands; duplicated for blocking tail reads. Not closed by close(). */
  client: Redis;
  /** Prefix of every key. Default "agentd:". */
  prefix?: string;
  /** XREAD BLOCK timeout of a tail loop, ms. Default 5000 (only bounds how long a stopped tail lingers). */
  blockMs?: number;
  /** How long ping() waits before the log counts as unreachable, ms. Default 1000. */
  pingTimeoutMs?: number;
  /**
   * After a tail read that returned events, wait this long before the next read, ms, so a
   * busy run's events reach its subscribers in batches (one write per subscriber for
   * several events) instead of one by one. Adds at most this much latency, and only to an
   * event that follows another within it. Default 5.
   */
  tailLingerMs?: number;
  /**
   * With minReplicas ≥ 1: a commit is acknowledged only once that many replicas hold it
   * (WAIT; redisconn/replica-wait.ts), and a head read to recover a failed commit is
   * confirmed the same way. Default: the primary alone.
   */
  replicaWait?: ReplicaWaitOptions;
}

type ScriptReply = [string, string?, string?, string?];

interface PendingCommit {
  c: Commit;
  resolve(o: CommitOutcome): void;
  reject(err: unknown): void;
}

/** Runs whose commits share one script call at most (bounds the call's size). */
const MAX_RUNS_PER_CALL = 64;
/**
 * Pending commits holding this many events are sent at once instead of at the end of the
 * event loop turn. Redis starts on them while this process seals the next runs' events, and
 * their replies come back before the rest: Node and Redis work at the same time instead of
 * taking turns (with every commit in one call, each side sat idle while the other worked;
 * measured in bench/eventlog (a) with 16 busy runs: 0.47-0.60x of raw XADD before, 0.85-0.9x).
 */
const EAGER_EVENTS = 8;
/** SHA-1 of the append script, for EVALSHA (Redis' script cache key). */
const APPEND_SHA = createHash("sha1").update(APPEND_LUA).digest("hex");

export class RedisEventLog implements EventLog {
  readonly kind = "redis";
  readonly #client: Redis;
  readonly #keys: LogKeys;
  #wait: ReplicaWait | undefined;
  #waitKey = "";
  readonly #blockMs: number;
  readonly #lingerMs: number;
  readonly #pingTimeoutMs: number;
  readonly #batcher: AppendBatcher;
  readonly #tails = new Map<string, RunTail>();
  readonly #feed: LiveFeed;
  readonly #pending: PendingCommit[] = [];
  #pendingEvents = 0;
  #flushScheduled = false;

  constructor(opts: RedisEventLogOptions) {
    this.#client = opts.client;
    this.#keys = logKeys(opts.prefix ?? "agentd:");
    this.#blockMs = opts.blockMs ?? 5000;
    this.#lingerMs = opts.tailLingerMs ?? 5;
    this.#pingTimeoutMs = opts.pingTimeoutMs ?? 1000;
    if (opts.replicaWait !== undefined && opts.replicaWait.minReplicas > 0) {
      this.#wait = new ReplicaWait(opts.client, opts.replicaWait);
      this.#waitKey = `${opts.prefix ?? "agentd:"}replica-wait`;
    }
    this.#batcher = new AppendBatcher({
      loadHead: (runId) => this.#loadHead(runId),
      commit: (c) => this.#commit(c),
    });
    this.#feed = {
      subscribe: (runId, onEvent, onRewound) => this.#subscribe(runId, onEvent, onRewound),
    };
  }

  #streamKey(runId: string): string {
    return this.#keys.stream(runId);
  }
  #metaKey(runId: string): string {
    return this.#keys.meta(runId);
  }
  get #feedKey(): string {
    return this.#keys.feed;
  }
  #tenantKey(tenantId: string): string {
    return this.#keys.tenantRuns(tenantId);
  }
  #sessionKey(tenantId: string, sessionId: string): string {
    return this.#keys.sessionRuns(tenantId, sessionId);
  }

  append(req: AppendRequest): Promise<LoggedEvent> {
    return this.#batcher.append(req);
  }

  async replicated<T>(read: () => Promise<T>): Promise<T> {
    const wait = this.#wait;
    if (wait === undefined) return read();
    const ticket = wait.ticket();
    const value = await read();
    // Replication is one ordered stream: once replicas hold a write made after the read
    // (on the same connection, so the same primary), they hold everything the read saw.
    await wrap(this.#client.incr(this.#waitKey));
    await wait.confirm(ticket);
    return value;
  }

  async #loadHead(runId: string): Promise<Head> {
    // Confirmed: the batcher acknowledges a commit whose confirmation failed when this
    // head shows it stored.
    const [seq, hash, ended] = await this.replicated(() =>
      wrap(this.#client.hmget(this.#metaKey(runId), "seq", "hash", "ended")),
    );
    return { seq: Number(seq ?? 0), hash: hash ?? GENESIS_HASH, ended: ended || undefined };
  }

  /**
   * Queues a commit; commits queued in the same turn of the event loop (many busy runs)
   * go to Redis together, in script calls of EAGER_EVENTS events or more (the rest at the
   * end of the turn). Each run has at most one commit in flight (the batcher), so the runs
   * of one call never depend on each other.
   */
  #commit(c: Commit): Promise<CommitOutcome> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ c, resolve, reject });
      this.#pendingEvents += c.events.length;
      if (this.#pendingEvents >= EAGER_EVENTS || this.#pending.length >= MAX_RUNS_PER_CALL) {
        this.#flush();
      } else if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#pending.length === 0) return;
    const all = this.#pending.splice(0, this.#pending.length);
    this.#pendingEvents = 0;
    void this.#send(all);
  }

  /**
   * One script call, written to the connection now: sendCommand bypasses the client's
   * auto-pipelining, which would hold the write until every microtask of this turn has run
   * (and so merge it with the rest). EVALSHA, then EVAL when Redis does not have the script
   * cached (first use, or after a restart); either is safe to resend (see append-lua.ts).
   */
  #evalAppend(args: (string | number)[]): Promise<ScriptReply[]> {
    const send = (name: "evalsha" | "eval", script: string): Promise<ScriptReply[]> => {
      // keyPrefix: the client's own key prefix (an ioredis option, e.g. `?keyPrefix=` in the
      // URL) applies to the script's keys as to every other command's.
      const cmd = new Command(name, [script, ...args], {
        replyEncoding: "utf8",
        keyPrefix: this.#client.options.keyPrefix,
      });
      this.#client.sendCommand(cmd);
      return cmd.promise as Promise<ScriptReply[]>;
    };
    return send("evalsha", APPEND_SHA).catch((err: unknown) => {
      if (!String((err as Error)?.message).includes("NOSCRIPT")) throw err;
      return send("eval", APPEND_LUA);
    });
  }

  async #send(group: PendingCommit[]): Promise<void> {
    const keys: string[] = [];
    const args: (string | number)[] = [];
    for (const { c } of group) {
      // The indexes and the owner are written with a run's first event only: later commits
      // leave those keys and arguments empty (less to send for every busy run).
      const first = c.prev.seq === 0;
      const tenant = c.tenantId ?? "";
      keys.push(
        this.#streamKey(c.runId),
        this.#metaKey(c.runId),
        first ? this.#tenantKey(tenant) : this.#keys.unused,
        first ? this.#sessionKey(tenant, c.sessionId) : this.#keys.unused,
      );
      args.push(
        c.fence === undefined ? "" : String(c.fence),
        c.prev.seq,
        c.prev.hash,
        c.known?.seq ?? 0,
        c.known?.hash ?? "",
        c.runId, // the feed entry names it
        first ? tenant : "",
        first ? c.sessionId : "",
        c.events[c.events.length - 1]?.hash ?? "",
        c.ends ?? "",
        c.events.length,
      );
      for (const e of c.events) args.push(e.json);
    }
    keys.push(this.#feedKey);
    let replies: ScriptReply[];
    try {
      // No fixed key count: one call carries 4 keys per run, then the feed's.
      const ticket = this.#wait?.ticket();
      replies = await wrap(this.#evalAppend([keys.length, ...keys, ...args]));
      if (this.#wait !== undefined && ticket !== undefined) await this.#wait.confirm(ticket);
    } catch (err) {
      for (const p of group) p.reject(err);
      return;
    }
    group.forEach((p, i) => {
      const reply = replies[i];
      if (reply?.[0] === "OK") p.resolve({ kind: "ok" });
      else if (reply?.[0] === "DELETED") p.resolve({ kind: "deleted" });
      else if (reply?.[0] === "ENDED") {
        p.resolve({
          kind: "conflict",
          head: { seq: Number(reply[2]), hash: reply[3] || GENESIS_HASH, ended: reply[1] },
        });
      } else if (reply?.[0] === "REWOUND") {
        p.resolve({
          kind: "rewound",
          head: { seq: Number(reply[1]), hash: reply[2] || GENESIS_HASH },
        });
      } else if (reply?.[0] === "FENCED") p.resolve({ kind: "fenced", epoch: Number(reply[1]) });
      else if (reply?.[0] === "CONFLICT") {
        p.resolve({
          kind: "conflict",
          head: { seq: Number(reply[1]), hash: reply[2] || GENESIS_HASH },
        });
      } else p.reject(new AgentdError("EIO", `append script answered ${String(reply?.[0])}`));
    });
  }

  async publish(tenantId: string, runId: string, json: string): Promise<void> {
    await wrap(
      this.#client.xadd(
        this.#feedKey,
        "MAXLEN",
        "~",
        FEED_MAX_LEN,
        "*",
        "r",
        runId,
        "t",
        tenantId,
        "a",
        "1",
        "b",
        "1",
        "e",
        json,
      ),
    );
  }

  async readFeed(from: string, limit: number): Promise<FeedEntry[]> {
    if (limit <= 0) return [];
    const rows = (await wrap(
      this.#client.call("XRANGE", this.#feedKey, from === "" ? "-" : from, "+", "COUNT", limit),
    )) as [string, string[]][];
    return rows.map(feedEntryOf);
  }

  async feedHead(): Promise<string> {
    const rows = (await wrap(
      this.#client.call("XREVRANGE", this.#feedKey, "+", "-", "COUNT", 1),
    )) as [string, string[]][];
    return rows[0]?.[0] ?? "";
  }

  async read(runId: string, afterSeq: number, limit?: number): Promise<LoggedEvent[]> {
    const args: (string | number)[] = [this.#streamKey(runId), `0-${afterSeq + 1}`, "+"];
    if (limit !== undefined) args.push("COUNT", limit);
    const rows = (await wrap(this.#client.call("XRANGE", ...args))) as [string, string[]][];
    return rows.map((row) => toLogged(runId, row));
  }

  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<LoggedEvent> {
    return followLog((r, a, l) => this.read(r, a, l), this.#feed, runId, afterSeq, signal);
  }

  followBatches(
    runId: string,
    afterSeq: number,
    signal: AbortSignal,
  ): AsyncIterable<LoggedEvent[]> {
    return followLogBatches((r, a, l) => this.read(r, a, l), this.#feed, runId, afterSeq, signal);
  }

  async #subscribe(
    runId: string,
    onEvent: (ev: LoggedEvent) => void,
    onRewound?: (last: LoggedEvent | undefined) => void,
  ): Promise<() => void> {
    let tail = this.#tails.get(runId);
    if (tail === undefined) {
      tail = new RunTail(
        this.#client,
        this.#streamKey(runId),
        runId,
        { blockMs: this.#blockMs, lingerMs: this.#lingerMs },
        () => this.#tails.delete(runId),
      );
      this.#tails.set(runId, tail);
    }
    return tail.add(onEvent, onRewound);
  }

  async head(runId: string): Promise<RunHead | undefined> {
    const [h] = await this.heads([runId]);
    return h;
  }

  async heads(runIds: readonly string[]): Promise<(RunHead | undefined)[]> {
    if (runIds.length === 0) return [];
    const pipe = this.#client.pipeline();
    for (const id of runIds) {
      pipe.hmget(this.#metaKey(id), "tenant", "session", "seq", "hash", "epoch", "ended");
      pipe.exists(this.#keys.tombstone(id));
    }
    const results = (await wrap(pipe.exec())) ?? [];
    return runIds.map((runId, i) => {
      const [err, row] = results[2 * i] ?? [null, null];
      if (err) throw redisError(err);
      const [terr, deleted] = results[2 * i + 1] ?? [null, 0];
      if (terr) throw redisError(terr);
      // A run whose deletion began is gone for every reader at once (internal/lifecycle).
      if (deleted === 1) return undefined;
      const [tenant, session, seq, hash, epoch, ended] = (row ?? []) as (string | null)[];
      if (!seq || seq === "0") return undefined;
      const head: RunHead = {
        runId,
        tenantId: tenant ?? "",
        sessionId: session ?? "",
        seq: Number(seq),
        hash: hash ?? "",
        epoch: Number(epoch ?? 0),
      };
      if (ended) head.ended = ended;
      return head;
    });
  }

  async bumpEpoch(runId: string): Promise<number> {
    return Number(await wrap(this.#client.hincrby(this.#metaKey(runId), "epoch", 1)));
  }

  async runNameKey(runId: string): Promise<Uint8Array> {
    // SET NX then GET: two workers that race both read the one that won.
    const key = this.#keys.nameKey(runId);
    await wrap(this.#client.set(key, randomBytes(32).toString("hex"), "NX"));
    const hex = (await wrap(this.#client.get(key))) as string | null;
    if (hex === null || !/^[0-9a-f]{64}$/.test(hex))
      throw new AgentdError("EIO", `run ${runId}: its name key is missing or malformed`);
    return Buffer.from(hex, "hex");
  }

  async listRunIds(q: ListRunIdsQuery): Promise<RunIdPage> {
    const key =
      q.sessionId === undefined
        ? this.#tenantKey(q.tenantId)
        : this.#sessionKey(q.tenantId, q.sessionId);
    const max = q.before === undefined ? "+" : `(${q.before}`;
    const ids = (await wrap(
      this.#client.zrevrangebylex(key, max, "-", "LIMIT", 0, q.limit + 1),
    )) as string[];
    const more = ids.length > q.limit;
    const page = more ? ids.slice(0, q.limit) : ids;
    return { runIds: page, next: more ? page[page.length - 1] : undefined };
  }

  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.#client.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new AgentdError("EUNAVAILABLE", "redis did not answer PING in time")),
            this.#pingTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      if (err instanceof AgentdError) throw err;
      throw redisError(err);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    for (const t of this.#tails.values()) t.stop();
    this.#tails.clear();
  }
}

/** Entries of a one-stream XREAD reply, RESP2 ([[key, entries]]) or RESP3 map ([key, entries]). */
function streamRows(res: unknown[] | null): [string, string[]][] {
  if (res === null || res.length === 0) return [];
  const first = res[0];
  const entries = Array.isArray(first) ? first[1] : res[1];
  return (entries ?? []) as [string, string[]][];
}

function toLogged(runId: string, [id, fields]: [string, string[]]): LoggedEvent {
  const seq = Number(id.slice(id.indexOf("-") + 1));
  const i = fields.indexOf("e");
  const json = fields[i + 1];
  if (i < 0 || json === undefined) {
    throw new AgentdError("EIO", `stream entry ${id} of run ${runId} has no event field`);
  }
  return new LoggedEvent(runId, seq, json);
}

/** The seq of a run stream's entry id ("0-<seq>"). */
function seqOfId(id: string): number {
  return Number(id.slice(id.indexOf("-") + 1));
}

const wrap = <T>(p: Promise<T>): Promise<T> => wrapRedis(p);

/**
 * One blocking XREAD loop per followed run, shared by every local subscriber. When a
 * blocking read times out (a quiet run), the tail looks at the stream's last entry: one
 * behind the last it delivered means Redis lost events (an AOF cut, a failover to a lagging
 * replica), and every subscriber is told (onRewound) before the tail goes on from there.
 */
class RunTail {
  readonly #subs = new Set<(ev: LoggedEvent) => void>();
  readonly #rewoundSubs = new Map<
    (ev: LoggedEvent) => void,
    (last: LoggedEvent | undefined) => void
  >();
  readonly #conn: Redis;
  readonly #key: string;
  readonly #runId: string;
  readonly #blockMs: number;
  readonly #lingerMs: number;
  readonly #onStop: () => void;
  readonly #ready: Promise<void>;
  #stopped = false;
  #lastId = "0-0";
  /** Ends the linger in progress: a stopped tail never waits out its linger. */
  #endLinger: (() => void) | undefined;

  constructor(
    client: Redis,
    key: string,
    runId: string,
    timing: { blockMs: number; lingerMs: number },
    onStop: () => void,
  ) {
    // A blocked XREAD holds its connection: tails never share the command connection.
    // Blocking reads: no command timeout; a tail waits for its connection rather than fail.
    this.#conn = client.duplicate({ commandTimeout: undefined, enableOfflineQueue: true });
    // Connection errors surface as failed XREADs, retried by the loop; no unhandled events.
    this.#conn.on("error", () => undefined);
    this.#key = key;
    this.#runId = runId;
    this.#blockMs = timing.blockMs;
    this.#lingerMs = timing.lingerMs;
    this.#onStop = onStop;
    this.#ready = this.#start();
  }

  async add(
    onEvent: (ev: LoggedEvent) => void,
    onRewound?: (last: LoggedEvent | undefined) => void,
  ): Promise<() => void> {
    this.#subs.add(onEvent);
    if (onRewound !== undefined) this.#rewoundSubs.set(onEvent, onRewound);
    try {
      await this.#ready;
    } catch (err) {
      // A tail that could not start (Redis down) must not stay shared: every later follow
      // of the run would fail at once, even after Redis is back.
      this.#subs.delete(onEvent);
      this.#rewoundSubs.delete(onEvent);
      this.stop();
      throw err;
    }
    return () => {
      this.#subs.delete(onEvent);
      this.#rewoundSubs.delete(onEvent);
      if (this.#subs.size === 0) this.stop();
    };
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#endLinger?.();
    this.#onStop();
    this.#conn.disconnect();
  }

  async #start(): Promise<void> {
    // Start from the current last entry: everything appended after this point is ours to
    // deliver; older events are read by each subscriber from the log.
    const last = (await wrap(this.#conn.call("XREVRANGE", this.#key, "+", "-", "COUNT", 1))) as [
      string,
      string[],
    ][];
    this.#lastId = last[0]?.[0] ?? "0-0";
    void this.#loop();
  }

  /** A quiet spell: is the stream's last entry behind the last one delivered? */
  async #checkRewound(): Promise<void> {
    const rows = (await this.#conn.call("XREVRANGE", this.#key, "+", "-", "COUNT", 1)) as [
      string,
      string[],
    ][];
    const id = rows[0]?.[0] ?? "0-0";
    if (seqOfId(id) >= seqOfId(this.#lastId)) return;
    this.#lastId = id;
    const last = rows[0] === undefined ? undefined : toLogged(this.#runId, rows[0]);
    for (const onRewound of this.#rewoundSubs.values()) onRewound(last);
  }

  /** Waits the linger out, or until the tail stops (its timer never keeps a process alive). */
  #linger(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#endLinger?.(), this.#lingerMs);
      this.#endLinger = () => {
        clearTimeout(timer);
        this.#endLinger = undefined;
        resolve();
      };
    });
  }

  async #loop(): Promise<void> {
    let backoff = 50;
    while (!this.#stopped) {
      try {
        const res = (await this.#conn.call(
          "XREAD",
          "COUNT",
          1000,
          "BLOCK",
          this.#blockMs,
          "STREAMS",
          this.#key,
          this.#lastId,
        )) as unknown[] | null;
        backoff = 50;
        const rows = streamRows(res);
        for (const row of rows) {
          const ev = toLogged(this.#runId, row);
          this.#lastId = row[0];
          for (const sub of this.#subs) sub(ev);
        }
        if (rows.length > 0 && this.#lingerMs > 0) await this.#linger();
        if (rows.length === 0) await this.#checkRewound();
      } catch {
        if (this.#stopped) return;
        // Redis restarting: the connection reconnects by itself; retry from the last id.
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }
}

/** A feed stream entry: [id, [r, run, t, tenant, a, first, b, last]]. */
function feedEntryOf([id, fields]: [string, string[]]): FeedEntry {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2)
    f.set(fields[i] as string, fields[i + 1] as string);
  const entry: FeedEntry = {
    id,
    runId: f.get("r") ?? "",
    tenantId: f.get("t") ?? "",
    fromSeq: Number(f.get("a") ?? 0),
    toSeq: Number(f.get("b") ?? 0),
  };
  const e = f.get("e");
  if (e !== undefined) entry.event = e;
  return entry;
}
