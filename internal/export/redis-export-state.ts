/**
 * ExportState in Redis, under the event log's prefix: `export:{sink}:lease` (string holder,
 * PX ttl), `export:{sink}:cursor` (string), `export:{sink}:dead` (list, newest first,
 * capped). The lease and the fenced cursor write are Lua scripts (check and write in one
 * step).
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";

const wrap = <T>(p: Promise<T>): Promise<T> => wrapRedis(p, "the export state (Redis)");

import { DEAD_LETTERS_MAX, type DeadLetter, type ExportState } from "./state.ts";

const LEASE_LUA = `
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`;

const SET_CURSOR_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1`;

export class RedisExportState implements ExportState {
  readonly #client: Redis;
  readonly #prefix: string;

  constructor(client: Redis, prefix = "agentd:") {
    this.#client = client;
    this.#prefix = prefix;
  }

  #key(sink: string, what: "lease" | "cursor" | "dead"): string {
    return `${this.#prefix}export:${sink}:${what}`;
  }

  async lease(sink: string, holder: string, ttlMs: number): Promise<boolean> {
    const r = await wrap(this.#client.eval(LEASE_LUA, 1, this.#key(sink, "lease"), holder, ttlMs));
    return Number(r) === 1;
  }

  async release(sink: string, holder: string): Promise<void> {
    await wrap(this.#client.eval(RELEASE_LUA, 1, this.#key(sink, "lease"), holder));
  }

  async cursor(sink: string): Promise<string> {
    return (await wrap(this.#client.get(this.#key(sink, "cursor")))) ?? "";
  }

  async setCursor(sink: string, holder: string, cursor: string): Promise<boolean> {
    const keys = [this.#key(sink, "lease"), this.#key(sink, "cursor")];
    const r = await wrap(this.#client.eval(SET_CURSOR_LUA, 2, ...keys, holder, cursor));
    return Number(r) === 1;
  }

  async deadLetter(sink: string, letter: DeadLetter): Promise<void> {
    const key = this.#key(sink, "dead");
    await wrap(
      this.#client
        .multi()
        .lpush(key, JSON.stringify(letter))
        .ltrim(key, 0, DEAD_LETTERS_MAX - 1)
        .exec(),
    );
  }

  async deadLetters(sink: string, limit: number): Promise<DeadLetter[]> {
    if (limit <= 0) return [];
    const rows = await wrap(this.#client.lrange(this.#key(sink, "dead"), 0, limit - 1));
    return rows.map((r) => JSON.parse(r) as DeadLetter);
  }
}
