/**
 * RunRateCounter on Redis: `tenant:{t}:minute:{minute}` counts the tenant's CreateRuns of
 * that minute, one Lua script (count, compare, give back) so two servers never both admit
 * the last run of a minute; the key expires two minutes after its first run. Must never:
 * leave a key without an expiry.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import type { RunRateCounter } from "./run-rate.ts";

const TAKE_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], 120000) end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
`;

type TakeClient = { agentdRunRateTake(key: string, limit: number): Promise<number> };

export class RedisRunRate implements RunRateCounter {
  readonly #client: Redis;
  readonly #prefix: string;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#client.defineCommand("agentdRunRateTake", { numberOfKeys: 1, lua: TAKE_LUA });
  }

  async take(tenantId: string, minute: number, limit: number): Promise<boolean> {
    const key = `${this.#prefix}tenant:${tenantId}:minute:${minute}`;
    const r = await wrapRedis(
      (this.#client as unknown as TakeClient).agentdRunRateTake(key, limit),
    );
    return Number(r) === 1;
  }
}
