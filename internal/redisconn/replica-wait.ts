/**
 * The log's durability rule across a failover: with `--redis-min-replicas-acked N` (N ≥ 1)
 * a write (an append group, CreateRun's admission) is acknowledged only after Redis `WAIT N
 * timeout` answered that N replicas hold it. A primary that dies afterwards takes nothing
 * acknowledged with it, as long as Sentinel promotes one of those replicas (it promotes the
 * most up-to-date one). Fewer than N in time: the caller gets EUNAVAILABLE — the write may
 * exist or vanish in a failover, and is retried like any unanswered write.
 *
 * WAIT counts the writes of its own connection, so it runs on the connection that wrote.
 * It must never acknowledge after a reconnect: ioredis resends unanswered commands on a new
 * connection, where a WAIT covers none of the old connection's writes and would answer at
 * once. A reconnect between the write and WAIT's answer fails the write instead.
 */
import type { Redis } from "ioredis";
import { AgentdError } from "../errors.ts";

export interface ReplicaWaitOptions {
  /** Replicas that must hold a write before it is acknowledged (≥ 1). */
  minReplicas: number;
  /** How long WAIT waits for them (ms). */
  timeoutMs: number;
}

/** Waits for replicas after the writes of one client; created per client. */
export class ReplicaWait {
  readonly #client: Redis;
  readonly #o: ReplicaWaitOptions;
  #connection = 0;

  constructor(client: Redis, o: ReplicaWaitOptions) {
    this.#client = client;
    this.#o = o;
    client.on("close", () => {
      this.#connection++;
    });
  }

  /** Taken before a write is sent: which connection it goes on. */
  ticket(): number {
    return this.#connection;
  }

  /** After the write answered: WAIT, and fail unless enough replicas have it on that connection. */
  async confirm(ticket: number): Promise<void> {
    const { minReplicas, timeoutMs } = this.#o;
    let acked: number;
    try {
      acked = Number(await this.#client.call("WAIT", minReplicas, timeoutMs));
    } catch (err) {
      throw new AgentdError(
        "EUNAVAILABLE",
        `Redis did not confirm the write reached its replicas: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (ticket !== this.#connection)
      throw new AgentdError(
        "EUNAVAILABLE",
        "the Redis connection was lost before its replicas confirmed the write; it may be lost in a failover",
      );
    if (acked < minReplicas)
      throw new AgentdError(
        "EUNAVAILABLE",
        `the write reached ${acked} of ${minReplicas} Redis replicas within ${timeoutMs} ms (--redis-min-replicas-acked, --redis-wait-timeout-ms); it may be lost in a failover`,
      );
  }
}
