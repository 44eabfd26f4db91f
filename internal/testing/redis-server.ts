/**
 * Starts a private redis-server on an ephemeral port for a test, with AOF on, in its own
 * temporary directory. In CI (CI=true) a missing redis-server is a failure, never a skip.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";

export interface TestRedis {
  port: number;
  url: string;
  dir: string;
  /** A new client connection (closed by stop()). */
  client(): Redis;
  /**
   * Kills the server (SIGKILL when `hard`) and starts it again on the same port and data;
   * `whileDown` runs in between (e.g. to cut the AOF in `dir`).
   */
  restart(opts?: { hard?: boolean; whileDown?: () => void | Promise<void> }): Promise<void>;
  stop(): Promise<void>;
}

export function redisServerPath(): string {
  try {
    return execFileSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "redis-server is not installed: install it (apt-get install -y redis-server) — tests need a real Redis",
    );
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startRedis(
  opts: { appendfsync?: "always" | "everysec" } = {},
): Promise<TestRedis> {
  const bin = redisServerPath();
  const dir = mkdtempSync(join(tmpdir(), "agentd-redis-"));
  const port = await freePort();
  const clients: Redis[] = [];
  let proc: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    proc = spawn(
      bin,
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        opts.appendfsync ?? "always",
        "--daemonize",
        "no",
        "--protected-mode",
        "no",
        "--loglevel",
        "warning",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    // Generous: a loaded machine never fails it, only a server that never answers does.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const probe = new Redis({
        port,
        host: "127.0.0.1",
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      probe.on("error", () => undefined); // not up yet: connect() rejects, we retry
      try {
        await probe.connect();
        await probe.ping();
        probe.disconnect();
        return;
      } catch {
        probe.disconnect();
        if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
        if (Date.now() > deadline)
          throw new Error(`waited 120 s for redis-server on port ${port} to answer PING`);
        await new Promise((r) => setTimeout(r, 30));
      }
    }
  };

  const kill = async (signal: NodeJS.Signals): Promise<void> => {
    const p = proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once("exit", () => resolve());
      p.kill(signal);
    });
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    client() {
      const c = new Redis({ port, host: "127.0.0.1" });
      c.on("error", () => undefined); // restarts are deliberate; commands retry by themselves
      clients.push(c);
      return c;
    },
    async restart(o = {}) {
      await kill(o.hard ? "SIGKILL" : "SIGTERM");
      await o.whileDown?.();
      await launch();
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
