/**
 * Starts a private redis-server on an ephemeral port for a test, with AOF on, in its own
 * temporary directory. In CI (CI=true) a missing redis-server is a failure, never a skip.
 * Options make it as operators run it: an ACL user with a password (the default user off),
 * TLS only (a CA made for the test), a replica of another test server.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";
import { serverCerts } from "./certs.ts";

export interface TestRedis {
  port: number;
  /** redis:// (rediss:// with tls) with the ACL user's name but never its password. */
  url: string;
  dir: string;
  /** With tls: the CA that signed the server's certificate (PEM file). */
  ca?: string;
  /** The options a client needs (user, password, TLS) — for the test's own clients. */
  clientOptions: RedisOptions;
  /** A new client connection (closed by stop()). */
  client(): Redis;
  /**
   * Kills the server (SIGKILL when `hard`) and starts it again on the same port and data;
   * `whileDown` runs in between (e.g. to cut the AOF in `dir`).
   */
  restart(opts?: { hard?: boolean; whileDown?: () => void | Promise<void> }): Promise<void>;
  /** SIGKILLs the server and leaves it down (a primary's death in a failover test). */
  kill(): Promise<void>;
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

export async function freePort(): Promise<number> {
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

export interface StartRedisOptions {
  appendfsync?: "always" | "everysec";
  /** An ACL user with every right; the default user is switched off. */
  user?: { name: string; password: string };
  /** Serve TLS only (no plain port), with a certificate for 127.0.0.1 from a new CA. */
  tls?: boolean;
  /** Start as a replica of the server on this port (127.0.0.1), logging in as `user`. */
  replicaOf?: number;
  /**
   * A further ACL user as the deployments in deploy/ make agentd's: only the keys `keys`
   * matches (`agentd:*`), no admin commands. The test's own clients keep `user` (or the
   * default user): they read and break whatever they like.
   */
  serviceUser?: { name: string; password: string; keys: string };
}

/** redis-server arguments for the ACL user, TLS and replication of `opts`. */
function operatorArgs(
  opts: StartRedisOptions,
  port: number,
  certs?: ReturnType<typeof serverCerts>,
): string[] {
  const args: string[] = [];
  if (opts.user !== undefined) {
    const u = opts.user;
    // Each word its own argument: redis-server joins the words after --user into one line.
    args.push("--user", "default", "off", "--user", u.name, "on", `>${u.password}`);
    args.push("~*", "&*", "+@all");
    // A replica logs in to its primary as the same user.
    args.push("--masteruser", u.name, "--masterauth", u.password);
  }
  if (opts.serviceUser !== undefined) {
    const u = opts.serviceUser;
    // The rule deploy/ ships (scripts/attack3-redis-acl.test.ts reads it from there).
    args.push("--user", u.name, "on", `>${u.password}`, `~${u.keys}`, "&*", "+@all");
    args.push("-@admin", "-@dangerous", "+info");
  }
  if (certs !== undefined) {
    args.push("--port", "0", "--tls-port", String(port), "--tls-cert-file", certs.cert);
    args.push("--tls-key-file", certs.key, "--tls-ca-cert-file", certs.ca);
    args.push("--tls-auth-clients", "no");
  } else args.push("--port", String(port));
  if (opts.replicaOf !== undefined) args.push("--replicaof", "127.0.0.1", String(opts.replicaOf));
  // A replica's first sync starts at once, not after Redis's default 5 s wait for others.
  args.push("--repl-diskless-sync-delay", "0");
  return args;
}

export async function startRedis(opts: StartRedisOptions = {}): Promise<TestRedis> {
  const bin = redisServerPath();
  const dir = mkdtempSync(join(tmpdir(), "agentd-redis-"));
  const port = await freePort();
  const clients: Redis[] = [];
  let proc: ChildProcess | undefined;
  const certs = opts.tls ? serverCerts(join(dir, "certs")) : undefined;
  const clientOptions: RedisOptions = { port, host: "127.0.0.1" };
  if (opts.user !== undefined) {
    clientOptions.username = opts.user.name;
    clientOptions.password = opts.user.password;
  }
  if (certs !== undefined) clientOptions.tls = { ca: readFileSync(certs.ca) };

  const launch = async (): Promise<void> => {
    proc = spawn(
      bin,
      [
        ...operatorArgs(opts, port, certs),
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
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let said = "";
    proc.stdout?.on("data", (b: Buffer) => {
      said = (said + b.toString()).slice(-2000); // why it stopped, for the error below
    });
    // Generous: a loaded machine never fails it, only a server that never answers does.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const probe = new Redis({
        ...clientOptions,
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      probe.on("error", () => undefined); // not up yet: connect() rejects, we retry
      try {
        await probe.connect();
        await probe.ping();
        // A replica is up once its first sync is done (WAIT counts it only then).
        if (
          opts.replicaOf !== undefined &&
          !/master_link_status:up/.test(await probe.info("replication"))
        )
          throw new Error("the replica's first sync is not done yet");
        probe.disconnect();
        return;
      } catch {
        probe.disconnect();
        if (proc.exitCode !== null)
          throw new Error(`redis-server exited with ${proc.exitCode}: ${said}`);
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
    url: `${certs ? "rediss" : "redis"}://${opts.user ? `${opts.user.name}@` : ""}127.0.0.1:${port}`,
    dir,
    ...(certs ? { ca: certs.ca } : {}),
    clientOptions,
    client() {
      const c = new Redis(clientOptions);
      c.on("error", () => undefined); // restarts are deliberate; commands retry by themselves
      clients.push(c);
      return c;
    },
    async restart(o = {}) {
      await kill(o.hard ? "SIGKILL" : "SIGTERM");
      await o.whileDown?.();
      await launch();
    },
    async kill() {
      await kill("SIGKILL");
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
