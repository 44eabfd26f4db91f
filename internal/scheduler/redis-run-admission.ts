/**
 * RunAdmission on Redis: one Lua script appends the run's first event with the event log's
 * own append body (append-lua.ts: the same stream entry, meta hash, indexes and feed entry
 * as RedisEventLog.append) and then runs the queue's enqueue function (redis-queue-lua.ts)
 * on the same run. A script is atomic, and Redis writes its effects to the AOF and to
 * replicas as one MULTI/EXEC: a crash, a failover or an AOF cut keeps both writes or
 * neither (redis-check-aof --fix drops an unfinished transaction whole).
 *
 * The event is sealed here exactly as the log's batcher seals a first event (seq 1 on the
 * genesis hash). Keys of one run span hash slots, like the log and the queue: not Redis
 * Cluster safe. Must never enqueue when the append was refused, nor keep any state in
 * process memory.
 */
import type { Redis } from "ioredis";
import { AgentdError, invalid } from "../errors.ts";
import { MAX_EVENT_BYTES } from "../eventlog/append-batcher.ts";
import { APPEND_BODY_LUA, RUN_ENDED_LUA } from "../eventlog/append-lua.ts";
import { LoggedEvent, sealEvent, TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { logKeys } from "../eventlog/redis-log-keys.ts";
import { ReplicaWait, type ReplicaWaitOptions } from "../redisconn/replica-wait.ts";
import type { AdmitRequest, RunAdmission } from "./admission.ts";
import {
  checkEnqueue,
  type ResolvedOptions,
  resolveOptions,
  type SchedulerOptions,
} from "./options.ts";
import { commonLua, ENQUEUE_FN_LUA } from "./redis-queue-lua.ts";

/**
 * KEYS: stream, meta, tenant index, session index, feed (the append body's, one run).
 * ARGV: the append body's arguments for one run with one event, then the queue's seven:
 * prefix, run, tenant, session, prio, agingMs, tenant limit.
 * Reply {append reply} when the append was refused, {append reply, {outcome, state}} when
 * the run is in the log and in the queue.
 */
export const ADMIT_LUA = `${commonLua("ARGV[#ARGV - 6]")}${RUN_ENDED_LUA}${ENQUEUE_FN_LUA}
local function append_first()
${APPEND_BODY_LUA}
end
local appended = append_first()[1]
if appended[1] ~= 'OK' then return {appended} end
local n = #ARGV
local run = ARGV[n - 5]
-- A resent call whose run ended meanwhile (its record may have expired): never queue it again.
if run_ended(k_meta(run), k_events(run)) then return {appended, {'duplicate', 'ended'}} end
return {appended, enqueue_run(run, ARGV[n - 4], ARGV[n - 3], tonumber(ARGV[n - 2]),
  tonumber(ARGV[n - 1]), tonumber(ARGV[n]))}
`;

export interface RedisRunAdmissionOptions extends SchedulerOptions {
  /** The connection the event log and the run queue use. Not closed by this. */
  client: Redis;
  /** Prefix of every key; must equal the event log's and the queue's. Default "agentd:". */
  prefix?: string;
  /** With minReplicas ≥ 1: CreateRun is acknowledged once that many replicas hold the run (WAIT). */
  replicaWait?: ReplicaWaitOptions;
}

type Reply = [string[], string[]?];
type ScriptClient = { agentdAdmitRun: (...args: (string | number)[]) => Promise<Reply> };

export class RedisRunAdmission implements RunAdmission {
  readonly #scripts: ScriptClient;
  readonly #prefix: string;
  readonly #o: ResolvedOptions;
  readonly #wait: ReplicaWait | undefined;

  constructor(opts: RedisRunAdmissionOptions) {
    this.#prefix = opts.prefix ?? "agentd:";
    this.#o = resolveOptions(opts);
    // EVALSHA with a fallback to EVAL: survives a Redis restart's empty script cache.
    opts.client.defineCommand("agentdAdmitRun", { numberOfKeys: 5, lua: ADMIT_LUA });
    this.#scripts = opts.client as unknown as ScriptClient;
    const w = opts.replicaWait;
    this.#wait = w !== undefined && w.minReplicas > 0 ? new ReplicaWait(opts.client, w) : undefined;
  }

  async admit(req: AdmitRequest): Promise<LoggedEvent> {
    const { first, priority } = req;
    if (!first.tenantId) throw invalid("tenantId", "the first event of a run must name its tenant");
    const enqueue = {
      runId: first.runId,
      tenantId: first.tenantId,
      sessionId: first.sessionId,
      priority,
    };
    checkEnqueue(enqueue);
    const sealed = sealEvent(first, 1, GENESIS_HASH, Date.now());
    if (TERMINAL_TYPES.has(sealed.type))
      throw invalid("payload", "a run's first event must not end it");
    if (sealed.json.length > MAX_EVENT_BYTES)
      throw new AgentdError(
        "ETOOLARGE",
        `event ${sealed.type} is ${sealed.json.length} bytes, over the ${MAX_EVENT_BYTES}-byte limit; store large content as an artifact`,
      );
    const k = logKeys(this.#prefix);
    const ticket = this.#wait?.ticket();
    const reply = await wrapRedis(
      this.#scripts.agentdAdmitRun(
        k.stream(first.runId),
        k.meta(first.runId),
        k.tenantRuns(first.tenantId),
        k.sessionRuns(first.tenantId, first.sessionId),
        k.feed,
        // The append body's arguments: no fence, head 0 on genesis, no known head to
        // check (nothing was seen before a run's first event), one event.
        "",
        0,
        GENESIS_HASH,
        0,
        "",
        first.runId,
        first.tenantId,
        first.sessionId,
        sealed.hash,
        "",
        1,
        sealed.json,
        // The queue's.
        this.#prefix,
        first.runId,
        first.tenantId,
        first.sessionId,
        priority,
        this.#o.agingMs,
        this.#o.tenantLimit(first.tenantId),
      ),
    );
    const [appended, queued] = reply;
    // Only a run that was written needs its replicas; a refused one wrote nothing.
    if (appended?.[0] === "OK" && this.#wait !== undefined && ticket !== undefined)
      await this.#wait.confirm(ticket);
    if (appended?.[0] === "OK" && queued !== undefined)
      return new LoggedEvent(first.runId, 1, sealed.json);
    if (appended?.[0] === "CONFLICT" || appended?.[0] === "ENDED")
      throw new AgentdError("ECONFLICT", `run ${first.runId} exists already; nothing was queued`);
    throw new AgentdError("EIO", `admission script answered ${String(appended?.[0])}`);
  }
}
