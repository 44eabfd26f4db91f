#!/usr/bin/env node
/**
 * agentd: the composition root. Reads configuration once, builds the adapters (event log,
 * artifact store, authenticator, policy), starts the server, and stops it cleanly on
 * SIGTERM. SIGHUP re-reads the policy.
 */
import { resolve } from "node:path";
import { Redis } from "ioredis";
import { FsArtifactStore } from "../../internal/artifacts/fs-artifact-store.ts";
import {
  type Authenticator,
  createOpenAuthenticator,
  createTokenAuthenticator,
  loadAuthFile,
  parseAuthConfig,
} from "../../internal/auth/tokens.ts";
import { AgentdError } from "../../internal/errors.ts";
import { openFileEventLog } from "../../internal/eventlog/file-event-log.ts";
import type { EventLog } from "../../internal/eventlog/port.ts";
import { RedisEventLog } from "../../internal/eventlog/redis-event-log.ts";
import { formatPolicyIssues, readPolicyFile } from "../../internal/kernel/policy-loader.ts";
import { createPolicyStore } from "../../internal/kernel/policy-store.ts";
import { RunProjectionCache } from "../../internal/projections/run-cache.ts";
import { createApp } from "../../internal/server/app.ts";
import { createDualServer } from "../../internal/server/dual-protocol.ts";
import { createLogger } from "../../internal/telemetry/logger.ts";
import { startTracing } from "../../internal/telemetry/sdk.ts";
import { type Config, type FlagName, flagHelp, parseConfig, UsageError } from "./config.ts";

const SERVER_FLAGS: FlagName[] = [
  "listen",
  "event-log",
  "auth-file",
  "auth-tokens",
  "artifact-dir",
  "redis-prefix",
  "max-request-bytes",
  "policy",
  "log-level",
  "insecure-no-auth",
];
const DEV_FLAGS: FlagName[] = [
  "data-dir",
  "listen",
  "auth-file",
  "auth-tokens",
  "artifact-dir",
  "max-request-bytes",
  "policy",
  "log-level",
];

const USAGE = `agentd — an operating system for AI agent runs

Usage:
  agentd server [flags]    the API server (stateless; Redis or file event log)
  agentd dev [flags]       server (and, once it lands, worker) on the embedded event log
  agentd worker [flags]    runs agents (not implemented yet: lands with the Workers issue)
  agentd policy check FILE validates a policy file: OK, or each issue as FILE:LINE:COL: field: message
  agentd hash-token TOKEN  prints the sha256 to put in an auth file

Run 'agentd COMMAND --help' for the flags of a command.`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "server":
    case "dev":
      return serve(cmd, rest);
    case "hash-token": {
      const { hashToken } = await import("../../internal/auth/tokens.ts");
      if (rest.length !== 1) throw new UsageError("hash-token takes exactly one TOKEN");
      process.stdout.write(`${hashToken(rest[0] as string)}\n`);
      return 0;
    }
    case "worker":
      process.stderr.write(
        "agentd worker: not implemented yet — workers land with the issue 'Workers: run scheduling on Redis, the agent loop…'. Runs stay queued until then.\n",
      );
      return 2;
    case "policy":
      return policyCommand(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(`${USAGE}\n`);
      return cmd === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command ${JSON.stringify(cmd)}`);
  }
}

async function serve(mode: "server" | "dev", argv: string[]): Promise<number> {
  const cfg = parseConfig(argv, process.env);
  if (cfg.help) {
    const flags = mode === "server" ? SERVER_FLAGS : DEV_FLAGS;
    process.stdout.write(
      `Usage: agentd ${mode} [flags]\n\nFlags (each also an environment variable):\n${flagHelp(flags)}\n`,
    );
    return 0;
  }
  const logger = createLogger({ level: cfg["log-level"], name: `agentd-${mode}` });
  // First, so a broken policy refuses the start before anything is opened.
  const policy = createPolicyStore(cfg.policy, { logger });
  const tracing = await startTracing(process.env, `agentd-${mode}`);
  const eventLogUrl = cfg["event-log"] ?? (mode === "dev" ? `file:${cfg["data-dir"]}` : undefined);
  if (eventLogUrl === undefined) {
    throw new UsageError(
      "--event-log (AGENTD_EVENT_LOG) is required: redis://HOST:PORT[/DB] or file:DIR",
    );
  }
  const auth = buildAuth(cfg, mode);
  const { log, artifactDir, closeAll } = await buildEventLog(eventLogUrl, cfg);
  const deps = {
    log,
    runs: new RunProjectionCache({ log }),
    artifacts: new FsArtifactStore(artifactDir),
  };
  const server = createDualServer(
    createApp({ deps, auth, logger, maxRequestBytes: cfg["max-request-bytes"], policy }),
  );
  const addr = await server.listen(cfg.listen.host, cfg.listen.port);
  const shown =
    addr.family === "IPv6" ? `[${addr.address}]:${addr.port}` : `${addr.address}:${addr.port}`;
  logger.info(
    {
      addr: shown,
      eventLog: log.kind,
      artifactDir,
      auth: auth === openAuth ? "off" : "tokens",
      policy: policy.path,
    },
    "listening",
  );

  // SIGHUP: re-read the policy; a broken file is logged and the last good policy stays.
  const reloadPolicy = (): void => void policy.reload();
  process.on("SIGHUP", reloadPolicy);
  await new Promise<void>((resolveStop) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, "shutting down");
      resolveStop();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  process.off("SIGHUP", reloadPolicy);
  await server.close(5000);
  await closeAll();
  await tracing?.shutdown();
  logger.info("stopped");
  return 0;
}

/** `agentd policy check FILE`: exit 0 and `OK FILE`, or 1 and one line per issue. */
function policyCommand(argv: string[]): number {
  if (argv[0] === "--help" || argv[0] === "-h" || (argv[0] === "check" && argv[1] === "--help")) {
    process.stdout.write(
      "Usage: agentd policy check FILE\n\nValidates a policy file (docs/policy.md). Prints OK FILE, or every issue as\nFILE:LINE:COL: field: message and exits 1.\n",
    );
    return 0;
  }
  if (argv[0] !== "check" || argv.length !== 2 || (argv[1] as string).startsWith("-")) {
    throw new UsageError("usage: agentd policy check FILE");
  }
  const file = argv[1] as string;
  const r = readPolicyFile(file);
  process.stdout.write(r.ok ? `OK ${file}\n` : `${formatPolicyIssues(r.errors)}\n`);
  return r.ok ? 0 : 1;
}

let openAuth: Authenticator | undefined;

function buildAuth(cfg: Config, mode: "server" | "dev"): Authenticator {
  if (cfg["auth-file"] !== undefined)
    return createTokenAuthenticator(loadAuthFile(cfg["auth-file"]));
  if (cfg["auth-tokens"] !== undefined) {
    return createTokenAuthenticator(parseAuthConfig(cfg["auth-tokens"], "AGENTD_AUTH_TOKENS"));
  }
  if (mode === "dev" || cfg["insecure-no-auth"]) {
    openAuth = createOpenAuthenticator();
    return openAuth;
  }
  throw new UsageError(
    "no credentials configured: give --auth-file FILE (AGENTD_AUTH_FILE) or AGENTD_AUTH_TOKENS; --insecure-no-auth serves everyone as tenant 'default'",
  );
}

async function buildEventLog(
  url: string,
  cfg: Config,
): Promise<{ log: EventLog; artifactDir: string; closeAll: () => Promise<void> }> {
  if (url.startsWith("file:")) {
    const dir = resolve(url.slice("file:".length) || cfg["data-dir"]);
    const log = await openFileEventLog({ dir });
    return {
      log,
      artifactDir: resolve(cfg["artifact-dir"] ?? `${dir}/artifacts`),
      closeAll: () => log.close(),
    };
  }
  const client = new Redis(url, { enableAutoPipelining: true, lazyConnect: true });
  client.on("error", () => undefined); // reconnects by itself; /readyz reports the outage
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw new AgentdError(
      "EUNAVAILABLE",
      `cannot reach Redis at ${url}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const log = new RedisEventLog({ client, prefix: cfg["redis-prefix"] });
  return {
    log,
    artifactDir: resolve(cfg["artifact-dir"] ?? ".data/artifacts"),
    closeAll: async () => {
      await log.close();
      client.disconnect();
    },
  };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`agentd: ${err.message}\nRun 'agentd --help' for usage.\n`);
      process.exit(2);
    }
    const msg = err instanceof AgentdError ? err.message : ((err as Error).stack ?? String(err));
    process.stderr.write(`agentd: ${msg}\n`);
    process.exit(1);
  },
);
