/**
 * Real Redis Sentinel for tests: `count` redis-sentinel processes (Debian's redis-sentinel,
 * i.e. redis-server in sentinel mode) watching a primary started by startRedis, with short
 * timeouts so a failover happens within seconds. Each in its own temporary directory (a
 * sentinel rewrites its config file). Never used outside tests.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, redisServerPath } from "./redis-server.ts";

export interface TestSentinels {
  ports: number[];
  masterName: string;
  /** redis+sentinel://[user@]127.0.0.1:P1,…/MASTER (no password). */
  url: string;
  /** The port of the primary the sentinels name now. */
  primaryPort(): Promise<number>;
  /** Resolves once every sentinel knows `replicas` replicas of the primary (needed to fail over). */
  waitForReplicas(replicas: number): Promise<void>;
  stop(): Promise<void>;
}

export interface StartSentinelsOptions {
  primaryPort: number;
  /** The data nodes' ACL user, as in startRedis's `user`. */
  user?: { name: string; password: string };
  count?: number;
  masterName?: string;
  /** Sentinel's down-after-milliseconds: how long the primary must be silent. Default 1000. */
  downAfterMs?: number;
}

/** Debian's redis-sentinel (scripts/ensure-packages.sh installs it). */
function sentinelPath(): string {
  try {
    return execFileSync("sh", ["-c", "command -v redis-sentinel"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      `redis-sentinel is not installed (next to ${redisServerPath()}): apt-get install -y redis-sentinel — the failover tests need real sentinels`,
    );
  }
}

function sentinelConf(o: StartSentinelsOptions, port: number, dir: string, name: string): string {
  const lines = [
    `port ${port}`,
    "bind 127.0.0.1",
    "protected-mode no",
    `dir ${dir}`,
    `sentinel monitor ${name} 127.0.0.1 ${o.primaryPort} ${Math.floor((o.count ?? 3) / 2) + 1}`,
    `sentinel down-after-milliseconds ${name} ${o.downAfterMs ?? 1000}`,
    `sentinel failover-timeout ${name} 10000`,
    `sentinel parallel-syncs ${name} 1`,
  ];
  if (o.user !== undefined)
    lines.push(
      `sentinel auth-user ${name} ${o.user.name}`,
      `sentinel auth-pass ${name} ${o.user.password}`,
    );
  return `${lines.join("\n")}\n`;
}

async function ask<T>(port: number, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
  c.on("error", () => undefined);
  try {
    await c.connect();
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

async function until(what: string, test: () => Promise<boolean>): Promise<void> {
  // Generous: a loaded machine never fails it, only sentinels that never get there.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (await test().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`waited 120 s for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startSentinels(o: StartSentinelsOptions): Promise<TestSentinels> {
  const name = o.masterName ?? "agentd";
  const procs: ChildProcess[] = [];
  const dirs: string[] = [];
  const ports: number[] = [];
  for (let i = 0; i < (o.count ?? 3); i++) {
    const dir = mkdtempSync(join(tmpdir(), "agentd-sentinel-"));
    const port = await freePort();
    const conf = join(dir, "sentinel.conf");
    writeFileSync(conf, sentinelConf(o, port, dir, name));
    procs.push(spawn(sentinelPath(), [conf], { stdio: "ignore" }));
    dirs.push(dir);
    ports.push(port);
  }
  const master = async (port: number): Promise<number> =>
    Number(
      (
        (await ask(port, (c) => c.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name))) as string[]
      )[1],
    );
  await until("the sentinels to answer", async () => {
    for (const p of ports) if ((await master(p)) !== o.primaryPort) return false;
    return true;
  });
  const user = o.user === undefined ? "" : `${o.user.name}@`;
  return {
    ports,
    masterName: name,
    url: `redis+sentinel://${user}${ports.map((p) => `127.0.0.1:${p}`).join(",")}/${name}`,
    primaryPort: () => master(ports[0] ?? 0),
    async waitForReplicas(replicas) {
      await until(`the sentinels to know ${replicas} replicas`, async () => {
        for (const p of ports) {
          const rows = (await ask(p, (c) => c.call("SENTINEL", "REPLICAS", name))) as string[][];
          const ok = rows.filter((r) => {
            const flags = r[r.indexOf("flags") + 1] ?? "";
            return flags === "slave";
          });
          if (ok.length < replicas) return false;
        }
        return true;
      });
    },
    async stop() {
      await Promise.all(
        procs.map(
          (p) =>
            new Promise<void>((resolve) => {
              if (p.exitCode !== null || p.signalCode !== null) return resolve();
              p.once("exit", () => resolve());
              p.kill("SIGKILL");
            }),
        ),
      );
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
}
