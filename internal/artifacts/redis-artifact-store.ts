/**
 * ArtifactStore on the deployment's Redis (`--artifact-store redis`): servers and workers
 * on different machines reach the same patches, snapshots and uploads without a shared
 * disk. A blob is a list of chunks (`<prefix>artifact:<digest>:chunks`, CHUNK_BYTES each)
 * and a meta hash (`<prefix>artifact:<digest>`: size, chunks, created); a streamed write
 * goes to a temporary list (expiring, so a killed writer leaves nothing for long) and becomes
 * the blob in one atomic step (a Lua script: rename and meta together), so a reader never
 * sees part of one. Blobs expire after the retention (0: kept), a repeated store renews it.
 * Must never: hold a whole blob in memory, or show a blob before it is complete.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { AgentdError, invalid } from "../errors.ts";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { abortable } from "./abortable.ts";
import { type ArtifactInfo, type ArtifactStore, DIGEST_RE, type PutStreamOptions } from "./port.ts";

/** Bytes per stored chunk: big enough for few round trips, small enough for Redis. */
export const CHUNK_BYTES = 1024 * 1024;
/** A temporary list lives this long without a write (a killed writer's goes by itself). */
const TEMP_TTL_MS = 60 * 60_000;

export interface RedisArtifactStoreOptions {
  client: Redis;
  prefix?: string;
  /** Blobs expire this long after they were last stored, ms; 0 keeps them. */
  retentionMs?: number;
  /** Largest blob stored, bytes (ETOOLARGE beyond, whatever a caller asks). Default 2 GiB. */
  maxBlobBytes?: number;
}

const wrap = <T>(p: Promise<T>): Promise<T> => wrapRedis(p, "the artifact store (Redis)");

/**
 * KEYS: temp list, blob chunks, blob meta. ARGV: size, chunks, now, retention ms. The blob
 * appears whole or not at all; an existing blob (same content) stays and has its expiry
 * renewed. Reply: 1 stored, 0 it was there.
 */
const COMMIT_LUA = `
local ttl = tonumber(ARGV[4])
-- There only when whole: its meta and (for a non-empty blob) its chunks. A blob whose chunks
-- expired or were evicted before its meta is written again, not renewed as it is.
local chunks = tonumber(redis.call('HGET', KEYS[3], 'chunks') or '-1')
if chunks >= 0 and (chunks == 0 or redis.call('EXISTS', KEYS[2]) == 1) then
  redis.call('DEL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
  return 0
end
redis.call('DEL', KEYS[2])
if tonumber(ARGV[2]) > 0 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('PERSIST', KEYS[2])
end
redis.call('HSET', KEYS[3], 'size', ARGV[1], 'chunks', ARGV[2], 'created', ARGV[3])
if ttl > 0 then
  if tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return 1`;

export class RedisArtifactStore implements ArtifactStore {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #retentionMs: number;
  readonly #maxBlob: number;

  constructor(opts: RedisArtifactStoreOptions) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#retentionMs = opts.retentionMs ?? 0;
    this.#maxBlob = opts.maxBlobBytes ?? 2 * 1024 ** 3;
  }

  #meta(digest: string): string {
    return `${this.#prefix}artifact:${digest}`;
  }
  #chunks(digest: string): string {
    return `${this.#prefix}artifact:${digest}:chunks`;
  }

  async put(data: Uint8Array): Promise<ArtifactInfo> {
    return this.putStream([data]);
  }

  async putStream(
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    opts: PutStreamOptions = {},
  ): Promise<ArtifactInfo> {
    opts.signal?.throwIfAborted();
    const max = Math.min(opts.maxBytes ?? Number.POSITIVE_INFINITY, this.#maxBlob);
    const temp = `${this.#prefix}artifact:tmp:${randomUUID()}`;
    const hash = createHash("sha256");
    let size = 0;
    let chunks = 0;
    let pending = Buffer.allocUnsafe(CHUNK_BYTES);
    let filled = 0;
    const flush = async (): Promise<void> => {
      if (filled === 0) return;
      const part = Buffer.from(pending.subarray(0, filled));
      filled = 0;
      await wrap(this.#client.multi().rpush(temp, part).pexpire(temp, TEMP_TTL_MS).exec());
      chunks++;
    };
    try {
      for await (const chunk of abortable(source, opts.signal)) {
        size += chunk.byteLength;
        if (size > max)
          throw new AgentdError("ETOOLARGE", `artifact exceeds the limit of ${max} bytes`);
        hash.update(chunk);
        let at = 0;
        while (at < chunk.byteLength) {
          const n = Math.min(CHUNK_BYTES - filled, chunk.byteLength - at);
          // Copied, not kept: a source may reuse its buffer for the next chunk.
          pending.set(chunk.subarray(at, at + n), filled);
          filled += n;
          at += n;
          if (filled === CHUNK_BYTES) await flush();
        }
      }
      await flush();
      const digest = hash.digest("hex");
      await wrap(
        this.#client.eval(
          COMMIT_LUA,
          3,
          temp,
          this.#chunks(digest),
          this.#meta(digest),
          size,
          chunks,
          Date.now(),
          this.#retentionMs,
        ),
      );
      return { digest, size };
    } catch (err) {
      await this.#client.del(temp).catch(() => undefined);
      pending = Buffer.alloc(0);
      throw err;
    }
  }

  async delete(digest: string): Promise<boolean> {
    if (!DIGEST_RE.test(digest)) throw invalid("digest", "must be 64 lowercase hex characters");
    return (await wrap(this.#client.del(this.#meta(digest), this.#chunks(digest)))) > 0;
  }

  async stat(digest: string): Promise<ArtifactInfo | undefined> {
    if (!DIGEST_RE.test(digest)) throw invalid("digest", "must be 64 lowercase hex digits");
    const size = await wrap(this.#client.hget(this.#meta(digest), "size"));
    return size === null ? undefined : { digest, size: Number(size) };
  }

  async *read(digest: string, chunkSize = 64 * 1024): AsyncIterable<Uint8Array> {
    if (!DIGEST_RE.test(digest)) throw invalid("digest", "must be 64 lowercase hex digits");
    const n = await wrap(this.#client.hget(this.#meta(digest), "chunks"));
    if (n === null) throw new AgentdError("ENOTFOUND", `artifact ${digest} not found`);
    for (let i = 0; i < Number(n); i++) {
      const part = await wrap(this.#client.lindexBuffer(this.#chunks(digest), i));
      // Expired (retention) between the look and the read: gone, not half there.
      if (part === null) throw new AgentdError("ENOTFOUND", `artifact ${digest} expired`);
      for (let at = 0; at < part.byteLength; at += chunkSize)
        yield part.subarray(at, Math.min(at + chunkSize, part.byteLength));
    }
  }
}
