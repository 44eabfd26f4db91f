/**
 * agentd's configuration: flags first, then AGENTD_* environment variables, then defaults.
 * Read once here (the composition root); internal/ only sees the parsed options.
 */

import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { z } from "zod";
import { parseDuration } from "../../internal/config/duration.ts";
import { parseRate } from "../../internal/config/rate.ts";
import { parseOrigin } from "../../internal/server/cors.ts";

/** The repository's policy.yaml: the default policy, found from the code, not the cwd. */
export const DEFAULT_POLICY = fileURLToPath(new URL("../../policy.yaml", import.meta.url));

/** The repository's skills/ directory. */
export const DEFAULT_SKILLS = fileURLToPath(new URL("../../skills", import.meta.url));

export const FLAGS = {
  listen: {
    env: "AGENTD_LISTEN",
    help: "HOST:PORT: server and dev serve gRPC, gRPC-Web, Connect, SSE, probes and /metrics on it; the worker its health port (/healthz, /readyz, /metrics), off unless set",
    def: "127.0.0.1:7070",
  },
  "tls-cert": {
    env: "AGENTD_TLS_CERT",
    help: "server, dev: PEM certificate (chain) to serve TLS with (h2 and HTTP/1.1 by ALPN); with --tls-key. Re-read on SIGHUP",
    def: undefined,
  },
  "tls-key": {
    env: "AGENTD_TLS_KEY",
    help: "server, dev: PEM private key of --tls-cert",
    def: undefined,
  },
  "export-config": {
    env: "AGENTD_EXPORT_CONFIG",
    help: "server, dev: YAML file of event export sinks (webhooks, OTLP logs); see docs/observability.md",
    def: undefined,
  },
  "event-log": {
    env: "AGENTD_EVENT_LOG",
    help: "redis://[USER@]HOST:PORT[/DB], rediss://… (TLS), redis+sentinel://[USER@]H1:26379,H2:26379/MASTER[/DB] (Sentinel; rediss+sentinel:// over TLS) or file:DIR (dev default: file:<data-dir>). The password: env AGENTD_REDIS_PASSWORD (and AGENTD_REDIS_SENTINEL_PASSWORD for the sentinels), never a flag",
    def: undefined,
  },
  "auth-file": {
    env: "AGENTD_AUTH_FILE",
    help: "YAML file of sha256-hashed bearer tokens: tokens: [{sha256, tenant, roles}], and tenants: (their policy files, limits); a worker reads only its tenants: (docs/policy.md)",
    def: undefined,
  },
  "auth-tokens": {
    env: "AGENTD_AUTH_TOKENS",
    help: "the auth file's YAML content inline (instead of --auth-file)",
    def: undefined,
  },
  "data-dir": {
    env: "AGENTD_DATA_DIR",
    help: "dev: directory of the embedded event log and artifacts",
    def: ".data/dev",
  },
  "artifact-store": {
    env: "AGENTD_ARTIFACT_STORE",
    help: "where artifacts (patches, snapshots, uploads) live: fs (--artifact-dir; servers and workers must share it) or redis (the event log's Redis: no shared disk)",
    def: "fs",
  },
  "artifact-retention": {
    env: "AGENTD_ARTIFACT_RETENTION",
    help: "with --artifact-store redis: how long a blob is kept after it was last stored (30d, 12h, 90m; 0 keeps them)",
    def: "0",
  },
  retention: {
    env: "AGENTD_RETENTION",
    help: "server, dev: how long an ended run is kept (7d, 30d, 12h; a tenant's `retention` in the auth file overrides it); past it the run, its artifacts, its idempotency key and its feed entries are deleted (docs/operations.md). off: kept forever",
    def: "off",
  },
  "upload-receipt-ttl": {
    env: "AGENTD_UPLOAD_RECEIPT_TTL",
    help: "server, dev: how long an UploadWorkspace receipt lets CreateRun name its digest and keeps the blob from every deletion (1m to 30d: 30m, 24h, 7d); expired receipts are swept every minute",
    def: "24h",
  },
  "retention-sweep-ms": {
    env: "AGENTD_RETENTION_SWEEP_MS",
    help: "server, dev: how often the retention sweeper looks for ended runs past their retention",
    def: "60000",
  },
  "artifact-dir": {
    env: "AGENTD_ARTIFACT_DIR",
    help: "directory of the artifact store (default: <data-dir>/artifacts, or .data/artifacts with Redis)",
    def: undefined,
  },
  "archive-dir": {
    env: "AGENTD_ARCHIVE_DIR",
    help: 'server, dev: archive each run to DIR/<tenant>/<run_id>/ before it is deleted (a failed archive keeps the run), and serve archived runs read-only (docs/operations.md, "Run archives")',
    def: undefined,
  },
  "cache-dir": {
    env: "AGENTD_CACHE_DIR",
    help: "worker: directory of the dependency caches of setup steps, per tenant (default: depcache beside the artifact directory)",
    def: undefined,
  },
  "cache-max-bytes": {
    env: "AGENTD_CACHE_MAX_BYTES",
    help: "worker: bytes of dependency cache archives kept per tenant, least recently used evicted first; 0: no caching",
    def: String(2 * 1024 ** 3),
  },
  "redis-prefix": { env: "AGENTD_REDIS_PREFIX", help: "prefix of every Redis key", def: "agentd:" },
  "redis-timeout-ms": {
    env: "AGENTD_REDIS_TIMEOUT_MS",
    help: "a Redis command that does not answer within it fails: during a Redis stall requests answer UNAVAILABLE instead of hanging (blocking reads are exempt)",
    def: "5000",
  },
  "redis-tls-ca": {
    env: "AGENTD_REDIS_TLS_CA",
    help: "with rediss://: PEM file of the CA that signed Redis's (and the sentinels') certificates; default: the system's CAs",
    def: undefined,
  },
  "redis-min-replicas-acked": {
    env: "AGENTD_REDIS_MIN_REPLICAS_ACKED",
    help: "an append or CreateRun is acknowledged only once this many replicas have it (Redis WAIT): with 1 and one replica, a Sentinel failover loses no acknowledged event; 0: the primary alone (see docs/operations.md)",
    def: "0",
  },
  "redis-wait-timeout-ms": {
    env: "AGENTD_REDIS_WAIT_TIMEOUT_MS",
    help: "with --redis-min-replicas-acked: how long a write waits for its replicas before it fails UNAVAILABLE (it may then be lost in a failover; a retry with the same idempotency key is safe)",
    def: "2000",
  },
  "cors-origins": {
    env: "AGENTD_CORS_ORIGINS",
    help: "origins allowed to call the API from a browser, comma-separated (https://console.example.com); default none: the console at /ui/ is same-origin and needs none",
    def: "",
  },
  "max-request-bytes": {
    env: "AGENTD_MAX_REQUEST_BYTES",
    help: "largest request message accepted (RESOURCE_EXHAUSTED above)",
    def: String(8 * 1024 * 1024),
  },
  "max-workspace-bytes": {
    env: "AGENTD_MAX_WORKSPACE_BYTES",
    help: "CreateRun: largest workspace archive once unpacked (the decompressed tar, contents and headers); RESOURCE_EXHAUSTED above",
    def: String(256 * 1024 * 1024),
  },
  "max-workspace-entries": {
    env: "AGENTD_MAX_WORKSPACE_ENTRIES",
    help: "CreateRun: most entries in a workspace archive, implied parent directories included; RESOURCE_EXHAUSTED above",
    def: "100000",
  },
  "max-concurrent-unpacks": {
    env: "AGENTD_MAX_CONCURRENT_UNPACKS",
    help: "CreateRun and UploadWorkspace: chunks of workspace unpacking run at once by this server (a slot per chunk, never held while an upload waits for its client); more wait for a turn within their deadline",
    def: "2",
  },
  "max-uploads-per-tenant": {
    env: "AGENTD_MAX_UPLOADS_PER_TENANT",
    help: "UploadWorkspace: streams one tenant may hold open on this server at once; one more is refused with RESOURCE_EXHAUSTED",
    def: "4",
  },
  "upload-idle-ms": {
    env: "AGENTD_UPLOAD_IDLE_MS",
    help: "UploadWorkspace: longest wait for an upload's next bytes; past it the stream is cut with DEADLINE_EXCEEDED and nothing is stored",
    def: "60000",
  },
  "upload-min-bytes-per-s": {
    env: "AGENTD_UPLOAD_MIN_BYTES_PER_S",
    help: "UploadWorkspace: least bytes per second a client sends, counted over each --upload-idle-ms of waiting for it; under it the stream is cut with DEADLINE_EXCEEDED and nothing is stored (0: off)",
    def: "16384",
  },
  policy: {
    env: "AGENTD_POLICY",
    help: "the policy file (docs/policy.md); re-read on SIGHUP, a broken reload keeps the last good one",
    def: DEFAULT_POLICY,
  },
  "shadow-policy": {
    env: "AGENTD_SHADOW_POLICY",
    help: "a candidate policy evaluated beside --policy on every call without effect; each call it would decide differently is a policy.shadow event (docs/policy.md, Shadow mode); re-read like --policy",
    def: undefined,
  },
  "log-level": { env: "AGENTD_LOG_LEVEL", help: "trace, debug, info, warn, error", def: "info" },
  "access-log": {
    env: "AGENTD_ACCESS_LOG",
    help: "server, dev: the access log, one JSON line per RPC (docs/operations.md): - for stdout, a file path (appended, reopened on SIGHUP), or off",
    def: "off",
  },
  "rate-limit": {
    env: "AGENTD_RATE_LIMIT",
    help: "server, dev: API requests per token, for tokens without their own rate: in the auth file: N/s or N/m, optionally ,burst=B (20/s,burst=40), or off; each API replica counts on its own (docs/operations.md)",
    def: "off",
  },
  concurrency: { env: "AGENTD_CONCURRENCY", help: "worker: runs driven at once", def: "2" },
  "model-base-url": {
    env: "OPENAI_BASE_URL",
    help: "worker: base URL of an OpenAI-compatible API (the key comes from OPENAI_API_KEY)",
    def: undefined,
  },
  model: {
    env: "AGENTD_MODEL",
    help: "worker: the model id; replay:FILE plays a recorded transcript instead of calling a model",
    def: "gpt-4o-mini",
  },
  replay: {
    env: "AGENTD_REPLAY",
    help: "worker: a recorded transcript (e.g. examples/fix-failing-test/transcript.json) played by the replay model when OPENAI_API_KEY is not set",
    def: undefined,
  },
  "skills-dir": {
    env: "AGENTD_SKILLS_DIR",
    help: "worker: the server's skills directory",
    def: DEFAULT_SKILLS,
  },
  "lease-ttl-ms": {
    env: "AGENTD_LEASE_TTL_MS",
    help: "run lease time-to-live: a dead worker's runs are taken over after it (same everywhere)",
    def: "10000",
  },
  "tenant-limit": {
    env: "AGENTD_TENANT_LIMIT",
    help: "runs of one tenant at once (same in every process sharing a queue)",
    def: "10",
  },
  "max-steps": { env: "AGENTD_MAX_STEPS", help: "worker: model steps per run at most", def: "50" },
  "max-run-tokens": {
    env: "AGENTD_MAX_RUN_TOKENS",
    help: "server: the largest token budget a CreateRun may ask for (budget.max_tokens)",
    def: "2000000",
  },
  "max-run-cost-usd": {
    env: "AGENTD_MAX_RUN_COST_USD",
    help: "server: the largest cost budget a CreateRun may ask for, US dollars (budget.max_cost_micros)",
    def: "100",
  },
  "max-run-wall-ms": {
    env: "AGENTD_MAX_RUN_WALL_MS",
    help: "server: the largest wall-clock budget a CreateRun may ask for, ms (budget.max_wall_ms)",
    def: "86400000",
  },
  "approval-hold-ms": {
    env: "AGENTD_APPROVAL_HOLD_MS",
    help: "worker: how long a run waiting for an approval keeps its worker slot and container; approved within it, the run resumes at once in the same container; 0 pauses at once",
    def: "60000",
  },
  "cancel-wait-ms": {
    env: "AGENTD_CANCEL_WAIT_MS",
    help: "server: how long CancelRun of a running run waits for its worker to end it (and answers the final state); past it CancelRun answers the run as it is, with cancel_requested set",
    def: "30000",
  },
  "shutdown-grace-ms": {
    env: "AGENTD_SHUTDOWN_GRACE_MS",
    help: "worker: on SIGTERM, how long active runs get to reach a step boundary; calls still running at 80% of it are killed (recorded interrupted) and their runs released",
    def: "20000",
  },
  "approval-sweep-ms": {
    env: "AGENTD_APPROVAL_SWEEP_MS",
    help: "server: how often pending approvals past their expiry (policy approvals.expireAfter) are denied and their paused runs re-enqueued, so the model gets the denial; 0: only when an approval is looked at",
    def: "60000",
  },
  "sandbox-driver": {
    env: "AGENTD_SANDBOX_DRIVER",
    help: "worker: where sandboxes run: docker (the engine DOCKER_HOST names) or kubernetes (one Pod per run in --k8s-namespace, through the API server of the in-cluster ServiceAccount or KUBECONFIG)",
    def: "docker",
  },
  "k8s-namespace": {
    env: "AGENTD_K8S_NAMESPACE",
    help: "worker, kubernetes driver: the namespace of the sandbox Pods (the worker's Role must allow pods, pods/exec and networkpolicies there)",
    def: "agentd-sandboxes",
  },
  "k8s-runtime-class": {
    env: "AGENTD_K8S_RUNTIME_CLASS",
    help: "worker, kubernetes driver: the RuntimeClass of sandbox Pods (for example gvisor); none: the cluster's default runtime",
    def: undefined,
  },
  "warm-sandboxes": {
    env: "AGENTD_WARM_SANDBOXES",
    help: "worker: started, empty sandboxes kept ready so a run only waits for its workspace to be copied in; 0 creates each one when a run starts",
    def: "1",
  },
  "price-table": {
    env: "AGENTD_PRICE_TABLE",
    help: "worker: YAML/JSON file of model prices {MODEL: {inputPerMTok, outputPerMTok}} in micro-dollars, over the defaults",
    def: undefined,
  },
  "insecure-no-auth": {
    env: "AGENTD_INSECURE_NO_AUTH",
    help: "server: accept every caller as tenant 'default' (dev does this unless given an auth file)",
    def: undefined,
    bool: true,
  },
} as const;

export type FlagName = keyof typeof FLAGS;

const ListenSchema = z
  .string()
  .regex(
    /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/,
    "must be HOST:PORT, e.g. 127.0.0.1:7070 or [::1]:7070",
  )
  .transform((s) => {
    const i = s.lastIndexOf(":");
    return { host: s.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(s.slice(i + 1)) };
  })
  .refine((l) => l.port <= 65535, "port must be at most 65535");

const EventLogSchema = z
  .string()
  .refine(
    (s) => /^rediss?(\+sentinel)?:\/\//.test(s) || s.startsWith("file:"),
    "must be redis://, rediss://, redis+sentinel://, rediss+sentinel:// or file:DIR",
  );

export const ConfigSchema = z.object({
  listen: ListenSchema.optional(),
  "export-config": z.string().min(1).optional(),
  "tls-cert": z.string().min(1).optional(),
  "tls-key": z.string().min(1).optional(),
  "event-log": EventLogSchema.optional(),
  "auth-file": z.string().min(1).optional(),
  "auth-tokens": z.string().min(1).optional(),
  "data-dir": z.string().min(1),
  "artifact-dir": z.string().min(1).optional(),
  "artifact-store": z.enum(["fs", "redis"]),
  "archive-dir": z
    .string()
    .min(1)
    .refine((s) => !s.includes("\0"), "must be a directory path")
    .optional(),
  "cache-dir": z.string().min(1).optional(),
  "cache-max-bytes": z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  "artifact-retention": z
    .string()
    .regex(/^\d{1,6}(s|m|h|d)?$/, "must be a duration like 30d, 12h, 90m, 600s, or 0")
    .transform((v) => {
      const n = Number(/^\d+/.exec(v)?.[0]);
      const unit =
        { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[v.replace(/^\d+/, "") || "s"] ?? 1000;
      return n * unit;
    }),
  retention: z.string().transform((v, ctx) => {
    if (v.trim() === "off") return undefined;
    const ms = parseDuration(v);
    if (typeof ms === "string") {
      ctx.addIssue({ code: "custom", message: `${ms}, or off` });
      return z.NEVER;
    }
    return ms;
  }),
  "retention-sweep-ms": z.coerce.number().int().min(100).max(86_400_000),
  "upload-receipt-ttl": z.string().transform((v, ctx) => {
    const ms = parseDuration(v);
    if (typeof ms === "string" || ms < 60_000 || ms > 30 * 86_400_000) {
      ctx.addIssue({
        code: "custom",
        message: typeof ms === "string" ? ms : "must be 1m to 30d",
      });
      return z.NEVER;
    }
    return ms;
  }),
  "redis-prefix": z.string().min(1).max(64),
  "cors-origins": z.string().transform((v, ctx) => {
    const out: string[] = [];
    for (const part of v
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "")) {
      const o = parseOrigin(part);
      if ("error" in o) {
        ctx.addIssue({ code: "custom", message: o.error });
        return z.NEVER;
      }
      out.push(o.origin);
    }
    return out;
  }),
  "redis-timeout-ms": z.coerce.number().int().min(100).max(600_000),
  "redis-tls-ca": z.string().min(1).optional(),
  "redis-min-replicas-acked": z.coerce.number().int().min(0).max(16),
  "redis-wait-timeout-ms": z.coerce.number().int().min(10).max(600_000),
  "max-request-bytes": z.coerce
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024 * 1024),
  "max-workspace-bytes": z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 ** 3),
  "max-workspace-entries": z.coerce.number().int().min(1).max(10_000_000),
  "max-concurrent-unpacks": z.coerce.number().int().min(1).max(64),
  "max-uploads-per-tenant": z.coerce.number().int().min(1).max(1024),
  "upload-idle-ms": z.coerce.number().int().min(1000).max(3_600_000),
  "upload-min-bytes-per-s": z.coerce
    .number()
    .int()
    .min(0)
    .max(1024 * 1024 * 1024),
  policy: z.string().min(1),
  "shadow-policy": z.string().min(1).optional(),
  "log-level": z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]),
  "access-log": z.string().min(1, "must be -, a file path, or off"),
  "insecure-no-auth": z.boolean(),
  "rate-limit": z.string().transform((v, ctx) => {
    const r = parseRate(v);
    if (typeof r === "string") {
      ctx.addIssue({ code: "custom", message: r });
      return z.NEVER;
    }
    return r;
  }),
  concurrency: z.coerce.number().int().min(1).max(256),
  "model-base-url": z.string().url().optional(),
  model: z.string().min(1),
  replay: z.string().min(1).optional(),
  "skills-dir": z.string().min(1),
  "lease-ttl-ms": z.coerce.number().int().min(1000).max(3_600_000),
  "tenant-limit": z.coerce.number().int().min(1).max(100_000),
  "max-steps": z.coerce.number().int().min(1).max(10_000),
  "max-run-tokens": z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  "max-run-cost-usd": z.coerce.number().min(0).max(1_000_000_000),
  "max-run-wall-ms": z.coerce.number().int().min(1000).max(Number.MAX_SAFE_INTEGER),
  "approval-hold-ms": z.coerce.number().int().min(0).max(3_600_000),
  "approval-sweep-ms": z.coerce.number().int().min(0).max(86_400_000),
  "shutdown-grace-ms": z.coerce.number().int().min(100).max(3_600_000),
  "cancel-wait-ms": z.coerce.number().int().min(0).max(2_147_483_647),
  "warm-sandboxes": z.coerce.number().int().min(0).max(64),
  "sandbox-driver": z.enum(["docker", "kubernetes"]),
  "k8s-namespace": z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "a Kubernetes namespace name (RFC 1123 label)"),
  "k8s-runtime-class": z
    .string()
    .regex(/^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/, "a RuntimeClass name (RFC 1123 subdomain)")
    .optional(),
  "price-table": z.string().min(1).optional(),
});

export type Config = z.infer<typeof ConfigSchema>;

export class UsageError extends Error {}

/** Parses argv (after the subcommand) and the environment into a Config. */
/**
 * Flags (only `allowed` ones on the command line: a command's --help lists exactly what it
 * takes) over AGENTD_* env over defaults.
 */
export function parseConfig(
  argv: string[],
  env: NodeJS.ProcessEnv,
  allowed: readonly FlagName[] = Object.keys(FLAGS) as FlagName[],
  command = "agentd",
  defaults: Partial<Record<FlagName, string | undefined>> = {},
): Config & { help: boolean } {
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {
    help: { type: "boolean", short: "h" },
  };
  for (const name of allowed)
    options[name] = { type: "bool" in FLAGS[name] ? "boolean" : "string" };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options, allowPositionals: false, strict: true }).values;
  } catch (err) {
    const unknown = /Unknown option '--([^']+)'/.exec((err as Error).message)?.[1];
    if (unknown !== undefined && Object.hasOwn(FLAGS, unknown))
      throw new UsageError(`--${unknown} is not a flag of ${command} (see ${command} --help)`);
    throw new UsageError((err as Error).message.replace(/\. To specify a positional.*$/s, ""));
  }
  const raw: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(FLAGS)) {
    const v = values[name] ?? env[f.env] ?? (name in defaults ? defaults[name as FlagName] : f.def);
    raw[name] = "bool" in f ? v === true || v === "1" || v === "true" : v;
  }
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? "");
    const f = FLAGS[name as FlagName];
    throw new UsageError(`--${name}${f ? ` (${f.env})` : ""}: ${issue?.message ?? "invalid"}`);
  }
  return { ...parsed.data, help: values.help === true };
}

export function flagHelp(
  names: readonly FlagName[],
  defaults: Partial<Record<FlagName, string | undefined>> = {},
): string {
  return names
    .map((n) => {
      const f = FLAGS[n];
      const d = n in defaults ? defaults[n] : f.def;
      const def = d === undefined ? "" : ` (default ${d})`;
      return `  --${n}${"bool" in f ? "" : " VALUE"}\n      ${f.help}${def}\n      env: ${f.env}`;
    })
    .join("\n");
}
