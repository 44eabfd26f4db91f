/**
 * Warm containers: started, empty sandboxes kept ready per shape, so a run only waits for
 * its workspace to stream in (about 10 ms) rather than for a container to be created and
 * started (about 170 ms here). Must never: hand out a container whose channel died or that
 * idled past its age, or keep containers of a shape nobody asks for any more.
 */
import type { AgentChannel } from "./agent-channel.ts";
import type { ControlChannel } from "./control-channel.ts";

/** A started container and its channel (the agent, or the control loop). */
export type WarmContainer = ControlChannel | AgentChannel;

/** What the pool needs of a warm sandbox (a Docker container's channel, a Pod's agent). */
export interface Warm {
  readonly container: { readonly id: string };
  readonly at: number;
  alive(): boolean;
  discard(): Promise<void>;
}

import type { SandboxShape } from "./port.ts";

/**
 * A warm container idle for longer is not handed out (it is replaced); other processes'
 * warm containers older than twice this are removed by reap() (their process died).
 */
export const WARM_MAX_AGE_MS = 10 * 60_000;

export interface WarmPoolOptions<W extends Warm = WarmContainer> {
  /** Ready containers kept per shape. 0: the pool is off. */
  target: number;
  /** Creates and starts one warm container of `shape`. */
  make(shape: SandboxShape): Promise<W>;
  now: () => number;
}

export interface WarmPool<W extends Warm = WarmContainer> {
  /** Tops the pool of `shape` up (one fill at a time per shape); resolves when full. */
  fill(shape: SandboxShape): Promise<void>;
  /** A ready warm container for `shape`, if one young enough is there; refills behind. */
  take(shape: SandboxShape): W | undefined;
  /** True for the ids of containers this pool made and did not hand out or remove. */
  owns(id: string): boolean;
  /** Removes the idle containers and stops refilling. */
  close(): Promise<void>;
}

const shapeKey = (s: SandboxShape): string =>
  JSON.stringify([
    s.image,
    s.limits,
    s.network,
    Object.entries(s.env ?? {}).sort(),
    s.userImage === true,
  ]);

export function createWarmPool<W extends Warm = WarmContainer>(
  opts: WarmPoolOptions<W>,
): WarmPool<W> {
  const pool = new Map<string, W[]>();
  const filling = new Map<string, Promise<void>>();
  const mine = new Set<string>();
  let closed = false;

  const discard = (w: W): void => {
    mine.delete(w.container.id);
    void w.discard();
  };

  function fill(shape: SandboxShape): Promise<void> {
    if (opts.target <= 0 || closed) return Promise.resolve();
    const key = shapeKey(shape);
    const running = filling.get(key);
    if (running !== undefined) return running;
    const p = (async () => {
      for (;;) {
        const ready = pool.get(key) ?? [];
        if (closed || ready.length >= opts.target) return;
        const w = await opts.make(shape);
        mine.add(w.container.id);
        if (closed) {
          mine.delete(w.container.id);
          await w.discard();
          return;
        }
        pool.set(key, [...(pool.get(key) ?? []), w]);
      }
    })().finally(() => filling.delete(key));
    filling.set(key, p);
    return p;
  }

  function take(shape: SandboxShape): W | undefined {
    if (opts.target <= 0 || closed) return undefined;
    const key = shapeKey(shape);
    // Runs of one worker share its policy's shape: another shape's containers are left
    // over from before a policy reload and go.
    for (const [k, idle] of pool) {
      if (k === key) continue;
      pool.delete(k);
      for (const w of idle) discard(w);
    }
    const ready = pool.get(key) ?? [];
    let got: W | undefined;
    while (got === undefined && ready.length > 0) {
      const w = ready.shift() as W;
      if (opts.now() - w.at <= WARM_MAX_AGE_MS && w.alive()) {
        mine.delete(w.container.id);
        got = w;
      } else discard(w);
    }
    // A failed refill only means the next create is cold.
    fill(shape).catch(() => undefined);
    return got;
  }

  return {
    fill,
    take,
    owns: (id) => mine.has(id),
    async close() {
      closed = true;
      await Promise.allSettled(filling.values());
      const idle = [...pool.values()].flat();
      pool.clear();
      await Promise.allSettled(
        idle.map((w) => {
          mine.delete(w.container.id);
          return w.discard();
        }),
      );
    },
  };
}
