#!/usr/bin/env node
/**
 * agentd: the composition root. Reads configuration once, builds the adapters (event log,
 * artifact store, authenticator, policy), starts the server, and stops it cleanly on
 * SIGTERM. SIGHUP re-reads the policy, the auth file and the TLS certificate.
 */
import "./empty-env.ts"; // first: before the AI SDK loads
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { text } from "node:stream/consumers";
import { createSecureContext } from "node:tls";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { parse as parseYaml } from "yaml";
import { sweepPausedRuns } from "../../internal/api/approvals.ts";
import type { ApiDeps } from "../../internal/api/deps.ts";
import { createTenantGate } from "../../internal/api/tenant-gate.ts";
import { ArchiveFallbackLog } from "../../internal/archive/archive-fallback-log.ts";
import { ArchiveShelf } from "../../internal/archive/archive-shelf.ts";
import { archiveBeforeDelete } from "../../internal/archive/write-archive.ts";
import { FsArtifactStore } from "../../internal/artifacts/fs-artifact-store.ts";
import type { ArtifactStore } from "../../internal/artifacts/port.ts";
import { RedisArtifactStore } from "../../internal/artifacts/redis-artifact-store.ts";
import {
  createReloadableAuth,
  type ReloadableAuth,
  watchFile,
} from "../../internal/auth/reloadable.ts";
import {
  type Authenticator,
  createOpenAuthenticator,
  createTokenAuthenticator,
  parseAuthFile,
} from "../../internal/auth/tokens.ts";
import { POLICY_DIFF_HELP, policyDiffCommand } from "../../internal/cli/policy-diff-command.ts";
import { createFsCacheStore } from "../../internal/depcache/fs-cache-store.ts";
import { createAiSdkEngine, createOpenAiModel } from "../../internal/engine/ai-sdk-engine.ts";
import type { AgentEngine } from "../../internal/engine/port.ts";
import {
  DEFAULT_PRICE_TABLE,
  type PriceTable,
  parsePriceTable,
} from "../../internal/engine/pricing.ts";
import { createReplayEngine, loadTranscript } from "../../internal/engine/replay-engine.ts";
import { AgentdError } from "../../internal/errors.ts";
import { FileEventLog, openFileEventLog } from "../../internal/eventlog/file-event-log.ts";
import type { EventLog } from "../../internal/eventlog/port.ts";
import { RedisEventLog } from "../../internal/eventlog/redis-event-log.ts";
import { loadExportConfig } from "../../internal/export/config.ts";
import { type Exporter, startExporter } from "../../internal/export/exporter.ts";
import { FileExportState } from "../../internal/export/file-export-state.ts";
import { RedisExportState } from "../../internal/export/redis-export-state.ts";
import type { ExportState } from "../../internal/export/state.ts";
import { RunState } from "../../internal/gen/agentd/v1/run_service_pb.js";
import { FileIdempotencyStore } from "../../internal/idempotency/file-idempotency.ts";
import type { IdempotencyStore } from "../../internal/idempotency/port.ts";
import { RedisIdempotencyStore } from "../../internal/idempotency/redis-idempotency.ts";
import { createKernel, type Kernel } from "../../internal/kernel/kernel.ts";
import { createPolicyChanges, type PolicyChanges } from "../../internal/kernel/policy-changes.ts";
import { formatPolicyIssues, readPolicyFile } from "../../internal/kernel/policy-loader.ts";
import type { Policy } from "../../internal/kernel/policy-schema.ts";
import { createPolicyStore, type PolicyStore } from "../../internal/kernel/policy-store.ts";
import {
  createEnvSecretProvider,
  createFileSecretProvider,
  type SecretProvider,
} from "../../internal/kernel/secrets.ts";
import {
  createShadowPolicies,
  type ShadowPolicies,
} from "../../internal/kernel/shadow-policies.ts";
import {
  createTenantPolicies,
  type TenantPolicies,
} from "../../internal/kernel/tenant-policies.ts";
import { createTrustStore } from "../../internal/kernel/trust-store.ts";
import { finishPending, type RunDeletionDeps } from "../../internal/lifecycle/delete-run.ts";
import { expireUploadReceipts } from "../../internal/lifecycle/expire-receipts.ts";
import { FileRunDeletion } from "../../internal/lifecycle/file-run-deletion.ts";
import type { RunDeletionStore } from "../../internal/lifecycle/port.ts";
import { RedisRunDeletion } from "../../internal/lifecycle/redis-run-deletion.ts";
import { runIsLive } from "../../internal/lifecycle/run-live.ts";
import { FilePolicyChangeStore } from "../../internal/policychanges/file-store.ts";
import type { PolicyChangeStore } from "../../internal/policychanges/port.ts";
import { RedisPolicyChangeStore } from "../../internal/policychanges/redis-store.ts";
import { RunProjectionCache } from "../../internal/projections/run-cache.ts";
import { connectRedis, createRedisClient } from "../../internal/redisconn/connect.ts";
import { parseRedisUrl } from "../../internal/redisconn/redis-url.ts";
import type { DockerSandbox } from "../../internal/sandbox/docker-sandbox.ts";
import type { RunAdmission } from "../../internal/scheduler/admission.ts";
import { MemoryWorkerPresence } from "../../internal/scheduler/memory-presence.ts";
import { MemoryRunQueue } from "../../internal/scheduler/memory-run-queue.ts";
import type { RunQueue } from "../../internal/scheduler/port.ts";
import type { WorkerPresence } from "../../internal/scheduler/presence.ts";
import { RedisWorkerPresence } from "../../internal/scheduler/redis-presence.ts";
import { RedisRunAdmission } from "../../internal/scheduler/redis-run-admission.ts";
import { RedisRunQueue } from "../../internal/scheduler/redis-run-queue.ts";
import { SequentialRunAdmission } from "../../internal/scheduler/sequential-run-admission.ts";
import { createAccessLog } from "../../internal/server/access-log.ts";
import { createApp, logAnswers } from "../../internal/server/app.ts";
import {
  createDualServer,
  createTlsServer,
  type DualServer,
  type TlsFiles,
} from "../../internal/server/dual-protocol.ts";
import { createHealthPort, type HealthPort } from "../../internal/server/health-port.ts";
import { instrumentAdmission } from "../../internal/telemetry/instrument-admission.ts";
import { instrumentEventLog } from "../../internal/telemetry/instrument-log.ts";
import { primeDriverSeries, primeKnownSeries } from "../../internal/telemetry/known-series.ts";
import { createLogger, type Logger } from "../../internal/telemetry/logger.ts";
import { startTracing } from "../../internal/telemetry/sdk.ts";
import { registerStoreGauges } from "../../internal/telemetry/store-gauges.ts";
import type { TenantArtifactLedger } from "../../internal/tenancy/artifact-bytes.ts";
import type { TenantDayLedger } from "../../internal/tenancy/day-usage.ts";
import { MemoryArtifactLedger } from "../../internal/tenancy/memory-artifact-bytes.ts";
import { MemoryDayLedger } from "../../internal/tenancy/memory-day-usage.ts";
import { rebuildArtifactBytes } from "../../internal/tenancy/rebuild-artifact-bytes.ts";
import { rebuildDayUsage } from "../../internal/tenancy/rebuild-day-usage.ts";
import { RedisArtifactLedger } from "../../internal/tenancy/redis-artifact-bytes.ts";
import { RedisDayLedger } from "../../internal/tenancy/redis-day-usage.ts";
import { RedisRunRate } from "../../internal/tenancy/redis-run-rate.ts";
import { MemoryRunRate, type RunRateCounter } from "../../internal/tenancy/run-rate.ts";
import { versionLine } from "../../internal/version/version.ts";
import { type PresenceBeat, startPresenceBeat } from "../../internal/worker/presence-beat.ts";
import {
  DEFAULT_RUN_LIMITS,
  sandboxShape,
  type TenantDriverDeps,
} from "../../internal/worker/run-driver.ts";
import { createWorker, type Worker } from "../../internal/worker/worker.ts";
import { type Config, type FlagName, flagHelp, parseConfig, UsageError } from "./config.ts";
import { crashPointFrom } from "./crash-at.ts";
import { startRetention } from "./retention.ts";
import { reviewerModels } from "./reviewer-model.ts";
import { openSandboxDriver } from "./sandbox-driver.ts";
import { startTenantLimits } from "./tenant-limits.ts";

const SERVER_FLAGS: FlagName[] = [
  "listen",
  "event-log",
  "auth-file",
  "auth-tokens",
  "artifact-dir",
  "artifact-store",
  "artifact-retention",
  "archive-dir",
  "retention",
  "retention-sweep-ms",
  "upload-receipt-ttl",
  "redis-prefix",
  "cors-origins",
  "max-request-bytes",
  "max-workspace-bytes",
  "max-workspace-entries",
  "max-concurrent-unpacks",
  "max-uploads-per-tenant",
  "upload-idle-ms",
  "upload-min-bytes-per-s",
  "policy",
  "shadow-policy",
  "approval-sweep-ms",
  "cancel-wait-ms",
  "lease-ttl-ms",
  "tenant-limit",
  "max-run-tokens",
  "max-run-cost-usd",
  "max-run-wall-ms",
  "redis-timeout-ms",
  "redis-tls-ca",
  "redis-min-replicas-acked",
  "redis-wait-timeout-ms",
  "export-config",
  "tls-cert",
  "tls-key",
  "rate-limit",
  "log-level",
  "insecure-no-auth",
];
const WORKER_FLAGS: FlagName[] = [
  "listen",
  "event-log",
  "auth-file",
  "auth-tokens",
  "artifact-dir",
  "artifact-store",
  "artifact-retention",
  "redis-prefix",
  "policy",
  "shadow-policy",
  "concurrency",
  "model-base-url",
  "model",
  "replay",
  "skills-dir",
  "lease-ttl-ms",
  "tenant-limit",
  "max-steps",
  "approval-hold-ms",
  "cache-dir",
  "cache-max-bytes",
  "warm-sandboxes",
  "sandbox-driver",
  "k8s-namespace",
  "k8s-runtime-class",
  "price-table",
  "redis-timeout-ms",
  "redis-tls-ca",
  "redis-min-replicas-acked",
  "redis-wait-timeout-ms",
  "shutdown-grace-ms",
  "log-level",
];
const DEV_FLAGS: FlagName[] = [
  "data-dir",
  "event-log",
  "listen",
  "auth-file",
  "auth-tokens",
  "artifact-dir",
  "artifact-store",
  "artifact-retention",
  "archive-dir",
  "retention",
  "retention-sweep-ms",
  "upload-receipt-ttl",
  "cors-origins",
  "max-request-bytes",
  "max-workspace-bytes",
  "max-workspace-entries",
  "max-concurrent-unpacks",
  "max-uploads-per-tenant",
  "upload-idle-ms",
  "upload-min-bytes-per-s",
  "policy",
  "shadow-policy",
  "concurrency",
  "model-base-url",
  "model",
  "replay",
  "skills-dir",
  "max-steps",
  "approval-hold-ms",
  "cache-dir",
  "cache-max-bytes",
  "approval-sweep-ms",
  "cancel-wait-ms",
  "lease-ttl-ms",
  "tenant-limit",
  "max-run-tokens",
  "max-run-cost-usd",
  "max-run-wall-ms",
  "warm-sandboxes",
  "sandbox-driver",
  "k8s-namespace",
  "k8s-runtime-class",
  "price-table",
  "shutdown-grace-ms",
  "export-config",
  "tls-cert",
  "tls-key",
  "rate-limit",
  "log-level",
];
const FLAGS_OF = { server: SERVER_FLAGS, worker: WORKER_FLAGS, dev: DEV_FLAGS } as const;
/** Defaults that differ per mode: the worker's health port is off unless asked for. */
const DEFAULTS_OF = { server: {}, worker: { listen: undefined }, dev: {} } as const;

/** What the agent is told it is, before skills and the task. */
const SYSTEM_PROMPT = `You are a coding agent working in a sandboxed copy of a repository (the workspace).
You act only through the tools you are given; each call passes a policy kernel that may run it,
show it to a person for approval, or refuse it with a reason — read the reason and adapt.
Work in small verified steps: read before you change, run the tests after a change, and finish
with a short summary of what you changed and why. Never try to reach the network or leave the workspace.`;

const USAGE = `agentd — an operating system for AI agent runs

Usage:
  agentd server [flags]    the API server (stateless; Redis or file event log)
  agentd dev [flags]       server and worker in one process, on the embedded event log
  agentd worker [flags]    claims runs and drives them (model from OPENAI_API_KEY / OPENAI_BASE_URL,
                           or the replay model: --replay FILE without a key, --model replay:FILE)
  agentd policy check FILE validates a policy file: OK, or each issue as FILE:LINE:COL: field: message
  agentd policy diff A B   how two policy files differ, by rule (exit 0 same, 1 different, 2 trouble)
  agentd hash-token TOKEN  prints the sha256 to put in an auth file (- reads TOKEN from stdin)
  agentd --version         prints the version

Run 'agentd COMMAND --help' for the flags of a command.`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "server":
    case "dev":
    case "worker":
      return serve(cmd, rest);
    case "hash-token":
      return hashTokenCommand(rest);
    case "--version":
    case "version":
      process.stdout.write(versionLine("agentd"));
      return 0;
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

const HASH_TOKEN_HELP = `Usage: agentd hash-token TOKEN
       agentd hash-token -        (reads the token from stdin: it stays out of ps and history)

Prints the token's sha256 (hex), what an auth file holds:
  tokens: [{sha256: <this>, tenant: acme, roles: [submit, read, approve]}]
`;

/** `agentd hash-token TOKEN | -`: the sha256 for an auth file. */
async function hashTokenCommand(rest: string[]): Promise<number> {
  if (rest.length === 1 && (rest[0] === "--help" || rest[0] === "-h")) {
    process.stdout.write(HASH_TOKEN_HELP);
    return 0;
  }
  if (rest.length !== 1)
    throw new UsageError("hash-token takes exactly one TOKEN (or - for stdin)");
  const { hashToken } = await import("../../internal/auth/tokens.ts");
  let token = rest[0] as string;
  if (token === "-") token = (await text(process.stdin)).replace(/\r?\n$/, "");
  if (token === "") throw new UsageError("hash-token: the token is empty");
  process.stdout.write(`${hashToken(token)}\n`);
  return 0;
}

type Mode = "server" | "worker" | "dev";

async function serve(mode: Mode, argv: string[]): Promise<number> {
  const cfg = parseConfig(argv, process.env, FLAGS_OF[mode], `agentd ${mode}`, DEFAULTS_OF[mode]);
  if (cfg.help) {
    process.stdout.write(
      `Usage: agentd ${mode} [flags]\n\nFlags (each also an environment variable):\n${flagHelp(FLAGS_OF[mode], DEFAULTS_OF[mode])}\n` +
        (mode === "server"
          ? ""
          : "\nThe model's API key comes from OPENAI_API_KEY (never a flag). Without it, --replay FILE\n" +
            "plays a recorded transcript (the replay model); --model replay:FILE always does.\n"),
    );
    return 0;
  }
  const logger = createLogger({ level: cfg["log-level"], name: `agentd-${mode}` });
  // First, so a broken policy refuses the start before anything is opened.
  const policy = createPolicyStore(cfg.policy, { logger });
  // The candidate evaluated beside it (shadow mode, docs/policy.md): broken, refused too.
  const shadowServer = shadowStore(cfg["shadow-policy"], logger);
  // SIGHUP (or a change of the file): re-read the policy, the auth file and the TLS
  // certificate; a broken file is logged and the last good one stays. Installed first: a
  // SIGHUP that came before the handler would end the process.
  const reloads: (() => void)[] = [() => void policy.reload()];
  const shadowWatch =
    shadowServer === undefined
      ? undefined
      : watchFile(shadowServer.path, () => void shadowServer.reload());
  // After any reload: a policy.changed notice for each tenant whose digest moved (set once
  // the log is open; a reload before that has no feed to write to and is the baseline).
  let policyChanges: PolicyChanges | undefined;
  const announce = (): void => void policyChanges?.check();
  const reloadPolicy = (): void => {
    for (const r of reloads) r();
    announce();
  };
  const policyWatch = watchFile(policy.path, () => {
    policy.reload();
    announce();
  });
  // A broken export config refuses the start too, naming the line and field at fault.
  const exports =
    mode === "worker" || cfg["export-config"] === undefined
      ? { sinks: [], leaseTtlMs: 0 }
      : loadExportConfig(cfg["export-config"], process.env);
  process.on("SIGHUP", reloadPolicy);
  const tracing = await startTracing(process.env, `agentd-${mode}`);
  const eventLogUrl = cfg["event-log"] ?? (mode === "dev" ? `file:${cfg["data-dir"]}` : undefined);
  if (eventLogUrl === undefined) {
    throw new UsageError(
      "--event-log (AGENTD_EVENT_LOG) is required: redis://[USER@]HOST:PORT[/DB], rediss://…, redis+sentinel://H1:26379,H2:26379/MASTER or file:DIR",
    );
  }
  const auth = mode === "worker" ? undefined : buildAuth(cfg, mode, logger);
  // Test builds only (fault injection); refused at start when it names an unknown point.
  const crashPoint = crashPointFrom(process.env);
  if (crashPoint !== undefined)
    logger.warn(
      { at: process.env.AGENTD_TEST_CRASH_AT },
      "AGENTD_TEST_CRASH_AT: this server kills itself at those points",
    );
  // Both or neither; readable, and a key that fits the certificate, before anything opens.
  const tls = tlsFiles(cfg);
  if (auth !== undefined && "reload" in auth)
    reloads.push(() => void (auth as ReloadableAuth).reload());
  // Tenants' own policy files (the auth file's tenants map): a worker reads the auth file
  // for them alone. Broken at start: refused, naming the tenant, file and line.
  const tenantAuth = auth ?? (mode === "worker" ? workerTenantAuth(cfg, logger) : undefined);
  if (auth === undefined && tenantAuth !== undefined && "reload" in tenantAuth)
    reloads.push(() => void (tenantAuth as ReloadableAuth).reload());
  if (mode === "worker" && tenantAuth === undefined)
    logger.info("no --auth-file: every tenant's runs use the server's policy (--policy)");
  const tenantPolicies = createTenantPolicies({
    server: policy,
    files: () => policyFiles(tenantAuth),
    logger,
    watch: (path, onChange) =>
      watchFile(path, () => {
        onChange();
        announce();
      }),
  });
  reloads.push(() => tenantPolicies.reload());
  // Candidate policies (the auth file's tenants.<id>.shadowPolicy, --shadow-policy).
  const shadowPolicies = createShadowPolicies({
    server: shadowServer,
    enforced: policy,
    files: () => shadowFiles(tenantAuth),
    logger,
    watch: (path, onChange) => watchFile(path, onChange),
  });
  reloads.push(() => shadowPolicies.reload());
  (tenantAuth as Partial<ReloadableAuth> | undefined)?.onReload?.(() => {
    tenantPolicies.sync();
    shadowPolicies.sync();
    announce();
  });
  const choice = mode === "server" ? undefined : buildEngine(cfg, mode, logger);
  const built = await buildEventLog(eventLogUrl, cfg);
  const { artifactDir, queue, presence, idempotency, closeAll } = built;
  // Every append measured and counted (agentd_event_log_append_duration_seconds, …).
  const log = instrumentEventLog(built.log);
  policyChanges = createPolicyChanges({
    tenants: () => [...(tenantAuth?.tenantIds?.() ?? []), ...policyFiles(tenantAuth).keys()],
    effective: (t) => tenantPolicies.forTenant(t),
    publish: (t, runId, json) => log.publish(t, runId, json),
    reporter: `${mode} ${hostname()}/${process.pid}`,
    logger,
  });
  // Every series with known labels at 0 before the first scrape: increase() over a window
  // counts the first event after this start (docs/observability.md).
  primeKnownSeries();
  if (choice !== undefined) primeDriverSeries(choice.model, cfg.concurrency);
  // A run's first event too, which the admission writes itself (agentd_runs_created_total).
  const admission = instrumentAdmission(built.admission, built.log.kind);
  const unregisterGauges = registerStoreGauges(log, auth === undefined ? undefined : queue);
  // The auth file's per-tenant concurrentRuns, published to the queue (every worker admits
  // by them) and shown as gauges; again after each reload (a raise lets held runs start).
  const limits =
    auth === undefined
      ? undefined
      : await startTenantLimits(
          auth,
          { queue, dayLedger: built.dayLedger, artifacts: built.tenantArtifacts },
          cfg,
          logger,
        );
  const artifacts = buildArtifactStore(cfg, built.redis, artifactDir, logger);
  // The embedded log's tenant ledgers live in this process: counted again from what is stored.
  await built.rebuildLedgers?.(artifacts);
  const runs = new RunProjectionCache({ log });
  // --archive-dir: runs are archived before deletion, and the API serves archived runs
  // read-only for runs the log no longer holds (internal/archive, docs/operations.md).
  const archive = buildArchive(cfg, log, artifacts);
  const apiRuns = archive === undefined ? runs : new RunProjectionCache({ log: archive.served });
  // Run deletion: DeleteRun, PurgeTenant (and the retention sweeper) — internal/lifecycle.
  const deletion: RunDeletionDeps = {
    store: built.deletion,
    artifacts: [artifacts],
    tenantArtifacts: built.tenantArtifacts,
    dropCached: (runId) => {
      runs.drop(runId);
      apiRuns.drop(runId);
    },
    ...(crashPoint === undefined ? {} : { crashPoint }),
  };

  let server: DualServer | undefined;
  let sweeper: Sweep | undefined;
  let retention: { stop(): Promise<void> } | undefined;
  let deletionFinisher: Sweep | undefined;
  let exporter: Exporter | undefined;
  if (auth !== undefined) {
    const deps = {
      log: archive?.served ?? log,
      runs: apiRuns,
      artifacts,
      queue,
      admission,
      idempotency,
      deletion,
      ...(archive === undefined
        ? {}
        : { archive: archive.served, beforeDelete: archive.beforeDelete }),
      cancelWaitMs: cfg["cancel-wait-ms"],
      uploadReceiptTtlMs: cfg["upload-receipt-ttl"],
      tenantArtifacts: built.tenantArtifacts,
      policy: (tenantId: string) => tenantPolicies.forTenant(tenantId).policy,
      // Rules from approvals: written into the tenant's file by ApplyPolicyChange, which
      // reloads at once (workers see the file change through their own watch).
      policyChanges: {
        store: built.policyChanges,
        chosen: (t: string) => tenantPolicies.forTenant(t),
        reload: () => {
          tenantPolicies.reload();
          announce();
        },
        publish: (t: string, runId: string, json: string) => log.publish(t, runId, json),
      },
      ...(limits === undefined
        ? {}
        : {
            tenantConcurrency: limits.concurrency,
            tenantGate: createTenantGate({
              daySpent: limits.daySpent,
              runsPerMinute: (t) => auth.tenantConfig(t).limits.runsPerMinute,
              rate: built.runRate,
            }),
            tenantUploadBytes: (t: string) => auth.tenantConfig(t).limits.uploadBytes,
          }),
      budgetMax: {
        maxTokens: cfg["max-run-tokens"],
        maxCostMicros: Math.round(cfg["max-run-cost-usd"] * 1e6),
        maxWallMs: cfg["max-run-wall-ms"],
      },
      ...(crashPoint === undefined ? {} : { crashPoint }),
    };
    const workspace = {
      maxBytes: cfg["max-workspace-bytes"],
      maxEntries: cfg["max-workspace-entries"],
      maxConcurrentUnpacks: cfg["max-concurrent-unpacks"],
      maxUploadsPerTenant: cfg["max-uploads-per-tenant"],
      uploadIdleMs: cfg["upload-idle-ms"],
      uploadMinBytesPerS: cfg["upload-min-bytes-per-s"],
    };
    const accessLog = createAccessLog(cfg["access-log"]);
    if (accessLog !== undefined) reloads.push(() => accessLog.reopen());
    const app = createApp({
      deps,
      auth,
      logger,
      accessLog,
      maxRequestBytes: cfg["max-request-bytes"],
      policy,
      workspace,
      corsOrigins: cfg["cors-origins"],
      ...(cfg["rate-limit"] === undefined ? {} : { rateLimit: cfg["rate-limit"] }),
    });
    if (tls === undefined) server = createDualServer(app);
    else {
      const secure = createTlsServer(app, readTls(tls));
      server = secure;
      reloads.push(() => {
        try {
          secure.reloadTls(readTls(tls));
          logger.info({ cert: tls.cert }, "TLS certificate reloaded");
        } catch (err) {
          logger.error(
            { err: { message: (err as Error).message } },
            "TLS reload failed: keeping the last good certificate",
          );
        }
      });
    }
    // Server and dev have the flag's default; only an explicit empty value could unset it.
    const at = cfg.listen;
    if (at === undefined) throw new UsageError("--listen (AGENTD_LISTEN) is required");
    const addr = await server.listen(at.host, at.port);
    const shown =
      addr.family === "IPv6" ? `[${addr.address}]:${addr.port}` : `${addr.address}:${addr.port}`;
    logger.info(
      {
        addr: shown,
        eventLog: log.kind,
        artifactDir,
        auth: auth === openAuth ? "off" : "tokens",
        policy: policy.path,
        worker: choice === undefined ? "off" : `${cfg.concurrency} slots`,
        ...(choice === undefined ? {} : { model: choice.model }),
      },
      "listening",
    );
    sweeper = startApprovalSweep(deps, cfg["approval-sweep-ms"], logger);
    // Ended runs past their tenant's retention are deleted (off unless configured).
    retention = startRetention({
      retentionMs: cfg.retention,
      sweepMs: cfg["retention-sweep-ms"],
      store:
        built.log instanceof FileEventLog
          ? { embedded: built.log }
          : { redis: built.redis as Redis, prefix: cfg["redis-prefix"] },
      auth,
      deletion,
      ...(archive === undefined ? {} : { beforeDelete: archive.beforeDelete }),
      logger,
    });
    deletionFinisher = startDeletionFinisher(deletion, logger);
    if (exports.sinks.length > 0) {
      const state = built.exportState;
      exporter = startExporter(exports.sinks, {
        log,
        state,
        logger,
        leaseTtlMs: exports.leaseTtlMs,
      });
      logger.info({ sinks: exports.sinks.map((k) => `${k.name} (${k.type})`) }, "exporting events");
    }
  }

  if (log instanceof FileEventLog && queue instanceof MemoryRunQueue)
    await requeueOpenRuns(log, runs, queue, logger);
  if (auth !== undefined && queue instanceof RedisRunQueue) {
    // Paused runs from before the paused index existed: the sweep must see them too.
    const added = await queue.indexPausedRuns();
    if (added > 0) logger.info({ runs: added }, "indexed paused runs for the approval sweep");
  }

  let worker: Worker | undefined;
  let healthPort: HealthPort | undefined;
  let stopping = false;
  let sandbox: DockerSandbox | undefined;
  let reaper: NodeJS.Timeout | undefined;
  let beat: PresenceBeat | undefined;
  if (choice !== undefined) {
    const workerId = `${hostname()}:${process.pid}`;
    const engine = await openSandboxDriver(cfg, {
      workerId,
      policy: () => policy.current(),
      logger,
    });
    logger.info({ driver: cfg["sandbox-driver"], engine: engine.describe }, "sandbox driver ready");
    const boxes = engine.sandbox;
    sandbox = boxes;
    // Alive before its first warm container exists: others reap its pool once beats stop.
    beat = await startPresenceBeat(presence, workerId, cfg["lease-ttl-ms"], (err) =>
      logger.warn({ err }, "presence beat failed"),
    );
    // Warm containers for the policy's sandbox, in the background: the first run starts warm
    // when they are ready in time, cold otherwise.
    boxes
      .prewarm(sandboxShape(policy.current()))
      .catch((err: unknown) => logger.warn({ err }, "starting warm sandboxes failed"));
    const trustCounters = createTrustStore({ log, runs });
    // The model reviewer (approval: reviewer) talks to the agent model's endpoint.
    const reviewerModel = reviewerModels({
      apiKey: process.env.OPENAI_API_KEY ?? "",
      baseURL: cfg["model-base-url"],
    });
    const reviewerOpt = reviewerModel === undefined ? {} : { reviewerModel };
    const kernel = createKernel({
      log,
      policy: () => policy.current(),
      policyPath: () => policy.path,
      shadow: () => shadowPolicies.forTenant("", "server"),
      secretProviders: secretProviders(policy.current()),
      trustCounters,
      artifacts,
      ...reviewerOpt,
    });
    const forTenant = tenantDriverDeps(tenantPolicies, shadowPolicies, (t) =>
      createKernel({
        log,
        policy: () => tenantPolicies.forTenant(t).policy,
        policySource: () => tenantPolicies.forTenant(t).source,
        policyPath: () => tenantPolicies.forTenant(t).path,
        shadow: () => shadowPolicies.forTenant(t, tenantPolicies.forTenant(t).source),
        shadowTenant: t,
        secretProviders: secretProviders(tenantPolicies.forTenant(t).policy),
        trustCounters,
        artifacts,
        ...reviewerOpt,
      }),
    );
    worker = createWorker({
      queue,
      workerId,
      concurrency: cfg.concurrency,
      leaseTtlMs: cfg["lease-ttl-ms"],
      logger,
      driver: {
        log,
        kernel,
        engine: choice.engine,
        sandbox: boxes,
        artifacts,
        policy: () => policy.current(),
        secretProviders: secretProviders(policy.current()),
        forTenant,
        logger,
        skillsDir: cfg["skills-dir"],
        systemPrompt: SYSTEM_PROMPT,
        model: choice.model,
        prices: priceTable(cfg),
        limits: { ...DEFAULT_RUN_LIMITS, maxSteps: cfg["max-steps"] },
        tenantDay: built.dayLedger,
        tenantArtifacts: built.tenantArtifacts,
        blobHolds: built.deletion.receipts,
        approvalHoldMs: cfg["approval-hold-ms"],
        trustCounters,
        ...(cfg["cache-max-bytes"] > 0
          ? {
              depCache: createFsCacheStore({
                dir: resolve(cfg["cache-dir"] ?? join(dirname(artifactDir), "depcache")),
                maxBytes: cfg["cache-max-bytes"],
              }),
            }
          : {}),
      },
    });
    if (mode === "worker" && cfg.listen !== undefined) {
      // Before the first claim: a port that cannot be had stops the start holding no run.
      // Ready: not stopping, the event log and the Docker engine answer (a dead engine
      // would have the worker claim runs only to fail them).
      healthPort = createHealthPort({
        ready: async () => !stopping && (await logAnswers(log)) && (await engine.ready()),
      });
      const addr = await healthPort.listen(cfg.listen.host, cfg.listen.port);
      logger.info({ addr: `${addr.address}:${addr.port}` }, "health port listening");
    }
    worker.start();
    // Containers of runs that ended (or whose worker died before removing them) go, now
    // and every minute.
    const reap = (): void =>
      void boxes
        .reap(
          // A run this log does not know belongs to another deployment on the same Docker
          // engine (another Redis, prefix or data dir) unless this one deleted it.
          runIsLive(runs, built.deletion),
          {
            // A dead worker's warm containers: gone within its ttl plus this reaper's minute.
            poolOwnerDead: async (owner) => (await presence.stateOf(owner)) === "dead",
          },
        )
        .then(
          (reaped) =>
            reaped.length > 0 && logger.info({ reaped }, "reaped containers of ended runs"),
        )
        .catch((err: unknown) => logger.warn({ err }, "reaping containers failed"));
    reap();
    reaper = setInterval(reap, 60_000);
    reaper.unref();
    if (mode === "worker") {
      logger.info(
        { eventLog: log.kind, concurrency: cfg.concurrency, model: choice?.model },
        "worker started",
      );
    }
  }

  await new Promise<void>((resolveStop) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, "shutting down");
      resolveStop();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  process.off("SIGHUP", reloadPolicy);
  policyWatch?.close();
  tenantPolicies.close();
  shadowPolicies.close();
  shadowWatch?.close();
  if (tenantAuth !== undefined && "close" in tenantAuth) (tenantAuth as ReloadableAuth).close();
  stopping = true; // /readyz of the health port answers 503 from now on
  // Stop claiming; active runs stop at their next step boundary and are released.
  clearInterval(reaper);
  beat?.stop();
  await sweeper?.stop();
  await retention?.stop();
  await deletionFinisher?.stop();
  await exporter?.stop();
  await worker?.stop(cfg["shutdown-grace-ms"]);
  await sandbox?.close();
  await server?.close(5000);
  await healthPort?.close();
  unregisterGauges();
  limits?.stop();
  await closeAll();
  await tracing?.shutdown();
  logger.info("stopped");
  return 0;
}

/**
 * The embedded log's queue lives in memory: after a restart, runs that were queued, running
 * (their worker died with the process) or paused with their approval resolved are queued
 * again. Enqueue is idempotent, so this is safe to repeat.
 */
async function requeueOpenRuns(
  log: FileEventLog,
  runs: RunProjectionCache,
  queue: MemoryRunQueue,
  logger: ReturnType<typeof createLogger>,
): Promise<void> {
  let n = 0;
  for (const runId of log.allRunIds()) {
    const run = await runs.get(runId);
    if (run === undefined) continue;
    if (run.state === RunState.PAUSED && run.pendingApprovalId !== "") {
      // Still waiting for a person: back in the queue as paused (the approval sweep sees
      // it; ResolveApproval resumes it).
      await queue.restorePaused({
        runId,
        tenantId: run.tenantId,
        sessionId: run.sessionId,
        priority: run.priority,
      });
      continue;
    }
    const open =
      run.state === RunState.QUEUED ||
      run.state === RunState.RUNNING ||
      (run.state === RunState.PAUSED && run.pendingApprovalId === "");
    if (!open) continue;
    await queue.enqueue({
      runId,
      tenantId: run.tenantId,
      sessionId: run.sessionId,
      priority: run.priority,
    });
    n++;
  }
  if (n > 0) logger.info({ runs: n }, "queued the open runs of the embedded log again");
}

/** The model the worker drives runs with, and the id its cost is priced by. */
interface ModelChoice {
  engine: AgentEngine;
  /** Model id for pricing and logs ("replay" costs nothing: priced at 0 in the table). */
  model: string;
}

/** The repository's examples/ directory: transcripts there are "bundled". */
const EXAMPLES_DIR = resolve(fileURLToPath(new URL("../../examples", import.meta.url)));

/**
 * The model, in this order:
 * 1. `--model replay:FILE`: the replay model on FILE, whatever the environment says;
 * 2. OPENAI_API_KEY set: the real model (`--model`, `--model-base-url` / OPENAI_BASE_URL);
 *    a `--replay` given as well is ignored, and the log says so;
 * 3. no key, `--replay FILE` / AGENTD_REPLAY: the replay model on FILE;
 * 4. none of these: dev runs without a worker (runs stay queued); a worker refuses to start.
 * The log says which one was chosen, so nobody mistakes a recording for a live model.
 */
function buildEngine(
  cfg: Config,
  mode: Mode,
  logger: ReturnType<typeof createLogger>,
): ModelChoice | undefined {
  if (cfg.model.startsWith("replay:")) {
    const file = resolve(cfg.model.slice("replay:".length));
    const choice = replayModel(file, "--model replay:FILE");
    logger.info(
      { transcript: file },
      `using the replay model ${file} (--model replay:FILE; a recorded transcript, not a live model)`,
    );
    return choice;
  }
  const apiKey = process.env.OPENAI_API_KEY ?? "";
  if (apiKey === "") {
    if (cfg.replay !== undefined) {
      const file = resolve(cfg.replay);
      const choice = replayModel(file, "--replay (AGENTD_REPLAY)");
      const bundled = file.startsWith(`${EXAMPLES_DIR}/`) ? "bundled " : "";
      logger.info(
        { transcript: file },
        `no OPENAI_API_KEY: using the ${bundled}replay model ${file} (a recorded transcript, not a live model; set OPENAI_API_KEY for one)`,
      );
      return choice;
    }
    if (mode === "worker") {
      throw new UsageError(
        "OPENAI_API_KEY is not set: a worker needs a model (and OPENAI_BASE_URL for a non-OpenAI endpoint), or --replay FILE for the replay model",
      );
    }
    logger.warn(
      "no OPENAI_API_KEY: the worker is off and runs stay queued (give --replay examples/fix-failing-test/transcript.json for the bundled replay model)",
    );
    return undefined;
  }
  const baseURL = cfg["model-base-url"];
  const model = createOpenAiModel({
    apiKey,
    model: cfg.model,
    ...(baseURL === undefined ? {} : { baseURL }),
  });
  logger.info(
    { model: cfg.model, baseURL: baseURL ?? "https://api.openai.com/v1" },
    `using the model ${cfg.model}${cfg.replay === undefined ? "" : " (OPENAI_API_KEY is set: --replay is ignored)"}`,
  );
  return { engine: createAiSdkEngine({ model }), model: cfg.model };
}

/** The replay model on a transcript file; a broken file stops the start with its reason. */
function replayModel(file: string, from: string): ModelChoice {
  let transcript: ReturnType<typeof loadTranscript>;
  try {
    transcript = loadTranscript(file);
  } catch (err) {
    throw new UsageError(`${from}: ${(err as Error).message}`);
  }
  return { engine: createReplayEngine({ transcript }), model: transcript.model };
}

/** The default prices, overridden per model by --price-table. */
function priceTable(cfg: Config): PriceTable {
  const file = cfg["price-table"];
  if (file === undefined) return DEFAULT_PRICE_TABLE;
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`--price-table ${file}: ${(err as Error).message}`);
  }
  return { ...DEFAULT_PRICE_TABLE, ...parsePriceTable(raw, file) };
}

/** Secret providers the policy names, in its order. */
function secretProviders(p: Policy): SecretProvider[] {
  return p.secrets.providers.map((pr) =>
    pr.type === "env" ? createEnvSecretProvider(process.env) : createFileSecretProvider(pr.dir),
  );
}

/** `agentd policy check FILE`: exit 0 and `OK FILE`, or 1 and one line per issue. */
function policyCommand(argv: string[]): number {
  const help = argv.some((a) => a === "--help" || a === "-h");
  if (argv[0] === "diff") {
    if (help) {
      process.stdout.write(POLICY_DIFF_HELP);
      return 0;
    }
    const files = argv.slice(1);
    if (files.length !== 2 || files.some((f) => f.startsWith("-")))
      throw new UsageError("usage: agentd policy diff A B");
    return policyDiffCommand(files[0] as string, files[1] as string, {
      out: (s) => process.stdout.write(s),
      err: (s) => process.stderr.write(s),
    });
  }
  if (help && (argv[0] === "check" || argv[0]?.startsWith("-"))) {
    process.stdout.write(
      "Usage: agentd policy check FILE\n\nValidates a policy file (docs/policy.md). Prints OK FILE, or every issue as\nFILE:LINE:COL: field: message and exits 1.\n",
    );
    return 0;
  }
  if (argv[0] !== "check" || argv.length !== 2 || (argv[1] as string).startsWith("-")) {
    throw new UsageError("usage: agentd policy check FILE | agentd policy diff A B");
  }
  const file = argv[1] as string;
  const r = readPolicyFile(file);
  process.stdout.write(r.ok ? `OK ${file}\n` : `${formatPolicyIssues(r.errors)}\n`);
  return r.ok ? 0 : 1;
}

/** A background sweep: stop() ends it and waits (bounded) for a sweep in progress. */
interface Sweep {
  stop(): Promise<void>;
}

/**
 * Every `everyMs`, the queue's paused runs are swept (sweepPausedRuns): approvals past their
 * expiry are denied and their runs re-enqueued. One sweep at a time; off when 0.
 */
/**
 * --archive-dir: the hook that archives a run before its deletion, and the log the API
 * serves from (the live log, then the archives for runs it no longer holds).
 */
function buildArchive(
  cfg: Config,
  log: EventLog,
  artifacts: ArtifactStore,
):
  | { served: ArchiveFallbackLog; beforeDelete: (tenantId: string, runId: string) => Promise<void> }
  | undefined {
  const raw = cfg["archive-dir"];
  if (raw === undefined) return undefined;
  const dir = resolve(raw);
  // Checked at start, not at the first deletion: a wrong path is a configuration error.
  try {
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    if (!statSync(dir).isDirectory()) throw new Error("it is not a directory");
  } catch (err) {
    throw new UsageError(
      `--archive-dir (AGENTD_ARCHIVE_DIR): cannot use ${dir} as the archive directory: ${(err as Error).message}`,
    );
  }
  return {
    served: new ArchiveFallbackLog(new ArchiveShelf({ dir }), log),
    beforeDelete: archiveBeforeDelete({ log, artifacts, dir }),
  };
}

/**
 * Finishes deletions a killed process left half done (a tombstone without its purge): once
 * at start, then every DELETION_FINISH_MS. Any server may; two at once do the same steps.
 */
const DELETION_FINISH_MS = 60_000;
function startDeletionFinisher(deletion: RunDeletionDeps, logger: Logger): Sweep {
  const once = () =>
    finishPending(deletion)
      .then((n) => n > 0 && logger.info({ runs: n }, "finished interrupted run deletions"))
      .catch((err: unknown) => logger.warn({ err }, "finishing interrupted run deletions failed"))
      .then(() => expireAllReceipts(deletion, logger));
  void once();
  const timer = setInterval(once, DELETION_FINISH_MS);
  timer.unref();
  return { stop: async () => clearInterval(timer) };
}

/** Drops every expired upload receipt (and the blobs that were only theirs), 500 at a time. */
async function expireAllReceipts(deletion: RunDeletionDeps, logger: Logger): Promise<void> {
  try {
    for (let round = 0; round < 100; round++) {
      const r = await expireUploadReceipts(deletion);
      if (r.expired > 0) logger.info({ ...r }, "expired upload receipts");
      if (r.expired < 500) return;
    }
  } catch (err) {
    logger.warn({ err }, "expiring upload receipts failed; retrying next minute");
  }
}

function startApprovalSweep(deps: ApiDeps, everyMs: number, logger: Logger): Sweep {
  if (everyMs <= 0) return { stop: async () => undefined };
  const abort = new AbortController();
  let running: Promise<void> | undefined;
  const sweep = (): void => {
    if (running !== undefined) return;
    running = sweepPausedRuns(deps, {
      signal: abort.signal,
      onError: (runId, err) => logger.warn({ err, runId }, "sweeping a paused run failed"),
    })
      .then(({ denied, requeued, dropped }) => {
        if (denied + requeued + dropped > 0)
          logger.info(
            { denied, requeued, dropped },
            "swept paused runs: expired approvals denied, resolved runs resume",
          );
      })
      .catch((err: unknown) => logger.warn({ err }, "approval expiry sweep failed"))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(sweep, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      abort.abort();
      if (running !== undefined)
        await Promise.race([running, new Promise((r) => setTimeout(r, 5000).unref())]);
    },
  };
}

let openAuth: Authenticator | undefined;

/** Each tenant's policy file, as the auth file says now. */
function policyFiles(auth: Authenticator | undefined): ReadonlyMap<string, string> {
  const files = new Map<string, string>();
  for (const id of auth?.tenantIds?.() ?? []) {
    const path = auth?.tenantConfig(id).policy;
    if (path !== undefined) files.set(id, path);
  }
  return files;
}

/** Each tenant's candidate (shadow) policy file, as the auth file says now. */
function shadowFiles(auth: Authenticator | undefined): ReadonlyMap<string, string> {
  const files = new Map<string, string>();
  for (const id of auth?.tenantIds?.() ?? []) {
    const path = auth?.tenantConfig(id).shadowPolicy;
    if (path !== undefined) files.set(id, path);
  }
  return files;
}

/** The server's candidate policy (--shadow-policy), or a start refused naming the flag and file. */
function shadowStore(path: string | undefined, logger: Logger): PolicyStore | undefined {
  if (path === undefined) return undefined;
  try {
    return createPolicyStore(path, { logger });
  } catch (err) {
    throw new AgentdError(
      "EVALIDATION",
      `--shadow-policy: ${err instanceof Error ? err.message : String(err)}`,
      { field: "shadow-policy", cause: err },
    );
  }
}

/**
 * A drive's tenant deps: the tenant's policy and a kernel deciding by it, for tenants with
 * a policy file of their own or a candidate of their own (one kernel each, made on first
 * use; its shadow metric carries the tenant); undefined otherwise.
 */
function tenantDriverDeps(
  policies: TenantPolicies,
  shadows: ShadowPolicies,
  kernelFor: (tenantId: string) => Kernel,
): (tenantId: string) => TenantDriverDeps | undefined {
  const kernels = new Map<string, Kernel>();
  return (tenantId) => {
    const chosen = policies.forTenant(tenantId);
    if (chosen.source === "server" && !shadows.hasOwn(tenantId)) return undefined;
    let kernel = kernels.get(tenantId);
    if (kernel === undefined) {
      kernel = kernelFor(tenantId);
      kernels.set(tenantId, kernel);
    }
    return {
      policy: () => policies.forTenant(tenantId).policy,
      kernel,
      secretProviders: secretProviders(chosen.policy),
      describe: { source: chosen.source, path: chosen.path },
    };
  };
}

/** A worker's auth file, read for its tenants' policies only (it serves no API). */
function workerTenantAuth(cfg: Config, logger: Logger): Authenticator | undefined {
  if (cfg["auth-file"] !== undefined) return createReloadableAuth(cfg["auth-file"], logger);
  if (cfg["auth-tokens"] !== undefined) {
    const file = parseAuthFile(cfg["auth-tokens"], "AGENTD_AUTH_TOKENS");
    return createTokenAuthenticator(file.tokens, file.tenants);
  }
  return undefined;
}

function buildAuth(cfg: Config, mode: Mode, logger: Logger): Authenticator {
  // Reloaded on SIGHUP and when the file changes: tokens rotate without a restart.
  if (cfg["auth-file"] !== undefined) return createReloadableAuth(cfg["auth-file"], logger);
  if (cfg["auth-tokens"] !== undefined) {
    const file = parseAuthFile(cfg["auth-tokens"], "AGENTD_AUTH_TOKENS");
    return createTokenAuthenticator(file.tokens, file.tenants);
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
): Promise<{
  log: EventLog;
  artifactDir: string;
  queue: RunQueue;
  /** CreateRun's one-step write of a run's first event and queue record. */
  admission: RunAdmission;
  /** Which workers are alive (their warm sandboxes are reaped when they are not). */
  presence: WorkerPresence;
  idempotency: IdempotencyStore;
  /** Run deletion's storage side (lifecycle/): the tombstone, the pieces. */
  deletion: RunDeletionStore;
  exportState: ExportState;
  /** The tenants' daily model use and limits, shared by every process on the store. */
  dayLedger: TenantDayLedger;
  /** The tenants' stored artifact bytes (artifactBytes), shared like the day ledger. */
  tenantArtifacts: TenantArtifactLedger;
  /** One-process ledgers (day use, artifactBytes) counted again from what is stored (embedded log). */
  rebuildLedgers?: (artifacts: ArtifactStore) => Promise<void>;
  /** The tenants' CreateRuns per minute (runsPerMinute), shared by every server. */
  runRate: RunRateCounter;
  /** Rules proposed from approvals, pending until an admin applies them (internal/policychanges). */
  policyChanges: PolicyChangeStore;
  /** The Redis client of a Redis event log (the artifact store may use it too). */
  redis?: Redis;
  closeAll: () => Promise<void>;
}> {
  const schedule = { leaseTtlMs: cfg["lease-ttl-ms"], tenantLimit: cfg["tenant-limit"] };
  if (url.startsWith("file:")) {
    const dir = resolve(url.slice("file:".length) || cfg["data-dir"]);
    const log = await openFileEventLog({ dir });
    // One process owns the embedded log, so its queue lives in that process too.
    const queue = new MemoryRunQueue({ log, ...schedule });
    const idempotency = new FileIdempotencyStore({ path: `${dir}/idempotency.jsonl` });
    const deletion = new FileRunDeletion({
      log,
      queue,
      idempotency,
      receiptsPath: `${dir}/upload-receipts.json`,
    });
    await deletion.expire();
    const tenantArtifacts = new MemoryArtifactLedger();
    const dayLedger = new MemoryDayLedger();
    return {
      log,
      artifactDir: resolve(cfg["artifact-dir"] ?? `${dir}/artifacts`),
      queue,
      // The queue dies with this process; the next start requeues the log's open runs.
      admission: new SequentialRunAdmission(log, queue),
      presence: new MemoryWorkerPresence(),
      idempotency,
      deletion,
      exportState: new FileExportState(`${dir}/export`),
      dayLedger,
      tenantArtifacts,
      rebuildLedgers: async (artifacts) => {
        await rebuildDayUsage(dayLedger, deletion.ledgerSource(), Date.now());
        await rebuildArtifactBytes(tenantArtifacts, deletion.ledgerSource(), artifacts);
      },
      runRate: new MemoryRunRate(),
      policyChanges: new FilePolicyChangeStore({ path: `${dir}/policy-changes.jsonl` }),
      closeAll: async () => {
        await queue.close();
        await log.close();
      },
    };
  }
  const target = parseRedisUrl(url, {
    password: process.env.AGENTD_REDIS_PASSWORD,
    sentinelPassword: process.env.AGENTD_REDIS_SENTINEL_PASSWORD,
  });
  const client = createRedisClient(target, {
    enableAutoPipelining: true,
    // Requests answer UNAVAILABLE during a stall instead of hanging for all of it.
    commandTimeout: cfg["redis-timeout-ms"],
    tlsCaFile: cfg["redis-tls-ca"],
  });
  client.on("error", () => undefined); // reconnects by itself; /readyz reports the outage
  await connectRedis(client, target);
  // The durability rule across a failover (docs/operations.md): acknowledged = on N replicas.
  const replicaWait = {
    minReplicas: cfg["redis-min-replicas-acked"],
    timeoutMs: cfg["redis-wait-timeout-ms"],
  };
  const log = new RedisEventLog({ client, prefix: cfg["redis-prefix"], replicaWait });
  const queue = new RedisRunQueue({ client, prefix: cfg["redis-prefix"], ...schedule });
  const idempotency = new RedisIdempotencyStore({ client, prefix: cfg["redis-prefix"] });
  return {
    log,
    artifactDir: resolve(cfg["artifact-dir"] ?? ".data/artifacts"),
    queue,
    admission: new RedisRunAdmission({
      client,
      prefix: cfg["redis-prefix"],
      replicaWait,
      ...schedule,
    }),
    presence: new RedisWorkerPresence({ client, prefix: cfg["redis-prefix"] }),
    idempotency,
    deletion: new RedisRunDeletion({ client, prefix: cfg["redis-prefix"], idempotency }),
    exportState: new RedisExportState(client, cfg["redis-prefix"]),
    dayLedger: new RedisDayLedger({ client, prefix: cfg["redis-prefix"] }),
    tenantArtifacts: new RedisArtifactLedger({ client, prefix: cfg["redis-prefix"] }),
    runRate: new RedisRunRate({ client, prefix: cfg["redis-prefix"] }),
    policyChanges: new RedisPolicyChangeStore({ client, prefix: cfg["redis-prefix"] }),
    redis: client,
    closeAll: async () => {
      await queue.close();
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
    process.stderr.write(`agentd: ${startFailure(err)}\n`);
    // Exit a moment later, not at once: an exit while V8's worker threads still compile the
    // modules just loaded has been seen to hang in Node's teardown (about 1 start in 20).
    setTimeout(() => process.exit(1), 150);
  },
);

/**
 * One line for what stops agentd from starting: the ordinary failures (a port in use, a
 * file it may not read) in words; a stack trace only for what is a bug.
 */
/** --artifact-store: the filesystem (one shared directory) or the event log's Redis. */
function buildArtifactStore(
  cfg: Config,
  redis: Redis | undefined,
  artifactDir: string,
  logger: Logger,
): ArtifactStore {
  if (cfg["artifact-store"] === "redis") {
    if (redis === undefined)
      throw new UsageError(
        "--artifact-store redis needs a Redis event log (--event-log redis://…)",
      );
    return new RedisArtifactStore({
      // Its own connection: megabyte chunks must not queue ahead of lease renewals.
      client: redis.duplicate(),
      prefix: cfg["redis-prefix"],
      retentionMs: cfg["artifact-retention"],
    });
  }
  const fs = new FsArtifactStore(artifactDir);
  // Temp files of writes a killed process never finished.
  void fs
    .sweepTemp()
    .then((n) => n > 0 && logger.info({ removed: n }, "removed unfinished artifact writes"))
    .catch((err: unknown) => logger.warn({ err }, "sweeping unfinished artifact writes failed"));
  return fs;
}

/** --tls-cert and --tls-key, checked now (a clear error at start). */
function tlsFiles(cfg: Config): { cert: string; key: string } | undefined {
  const cert = cfg["tls-cert"];
  const key = cfg["tls-key"];
  if (cert === undefined && key === undefined) return undefined;
  if (cert === undefined || key === undefined)
    throw new UsageError("--tls-cert (AGENTD_TLS_CERT) and --tls-key (AGENTD_TLS_KEY) go together");
  try {
    createSecureContext(readTls({ cert, key }));
  } catch (err) {
    throw new AgentdError("EVALIDATION", `--tls-cert/--tls-key: ${(err as Error).message}`, {
      field: "tls-cert",
    });
  }
  return { cert, key };
}

function readTls(files: { cert: string; key: string }): TlsFiles {
  return { cert: readFileSync(files.cert), key: readFileSync(files.key) };
}

function startFailure(err: unknown): string {
  if (err instanceof AgentdError) return err.message;
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  const where =
    e.address === undefined ? "" : ` ${e.address}${e.port === undefined ? "" : `:${e.port}`}`;
  switch (e?.code) {
    case "EADDRINUSE":
      return `cannot listen on${where}: the address is already in use (another agentd? pick another with --listen)`;
    case "EADDRNOTAVAIL":
      return `cannot listen on${where}: no such local address (check --listen)`;
    case "EACCES":
      return `permission denied${where}${e.path === undefined ? "" : ` ${e.path}`} (a port below 1024 needs root; a file needs read access)`;
    case "ENOENT":
      return `no such file: ${e.path ?? e.message}`;
    default:
      return e?.stack ?? String(err);
  }
}
