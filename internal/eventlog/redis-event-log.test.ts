import { Redis } from "ioredis";
import { ulid } from "ulid";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runEventLogConformance } from "./conformance.ts";
import { RedisEventLog } from "./redis-event-log.ts";

let redis: TestRedis;
const prefix = `test:${ulid()}:`;
const extra: Redis[] = [];

runEventLogConformance("redis", {
  async open() {
    redis = await startRedis();
    return new RedisEventLog({ client: redis.client(), prefix });
  },
  async writers(n) {
    return Array.from({ length: n }, () => {
      const c = new Redis(redis.url);
      c.on("error", () => undefined);
      extra.push(c);
      return new RedisEventLog({ client: c, prefix });
    });
  },
  async restart() {
    // SIGKILL: only what AOF (appendfsync always) persisted survives.
    await redis.restart({ hard: true });
    return new RedisEventLog({ client: redis.client(), prefix });
  },
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis.stop();
  },
});
