/**
 * The HTTP application behind the one port: the Connect/gRPC/gRPC-Web API (RunService,
 * health, reflection), the SSE event stream, /healthz, /readyz, /metrics and the admin-only
 * /metrics/tenants.
 */

import type http from "node:http";
import type http2 from "node:http2";
import { file_google_protobuf_timestamp } from "@bufbuild/protobuf/wkt";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { kHttp2Stream } from "../api/context.ts";
import type { ApiDeps } from "../api/deps.ts";
import { toConnectError } from "../api/errors.ts";
import { archivedReadOnlyInterceptor } from "../api/interceptors/archived-read-only.ts";
import { authGate } from "../api/interceptors/auth.ts";
import { edgeErrorGate } from "../api/interceptors/edge-errors.ts";
import { errorInterceptor } from "../api/interceptors/errors.ts";
import { checkRate, rateLimitGate } from "../api/interceptors/rate-limit.ts";
import { traceInterceptor } from "../api/interceptors/tracing.ts";
import { registerRunService } from "../api/routes.ts";
import {
  createWorkspaceUploader,
  DEFAULT_WORKSPACE_LIMITS,
  kWorkspaceUploader,
  type WorkspaceLimits,
} from "../api/workspace-upload.ts";
import type { ReloadableAuth } from "../auth/reloadable.ts";
import type { Authenticator } from "../auth/tokens.ts";
import type { EventLog } from "../eventlog/port.ts";
import { file_agentd_v1_events } from "../gen/agentd/v1/events_pb.js";
import { file_agentd_v1_run_service } from "../gen/agentd/v1/run_service_pb.js";
import { file_grpc_health_v1_health } from "../gen/grpc/health/v1/health_pb.js";
import type { PolicyStore } from "../kernel/policy-store.ts";
import { createTokenBuckets, type Rate } from "../ratelimit/token-buckets.ts";
import { primeTenantSeries } from "../telemetry/known-series.ts";
import type { Logger } from "../telemetry/logger.ts";
import { scrape } from "../telemetry/scrape.ts";
import { type AccessLog, accessGate, accessInterceptor, kPeer } from "./access-log.ts";
import { serveConsole } from "./console.ts";
import { applyCors } from "./cors.ts";
import type { RequestHandler } from "./dual-protocol.ts";
import { registerHealth } from "./health.ts";
import { createLiveStreams } from "./live-streams.ts";
import { registerReflection } from "./reflection.ts";
import { type Res, SSE_PATH, serveSse } from "./sse.ts";
import { serveWatchSse, WATCH_SSE_PATH } from "./sse-watch.ts";
import { serveTenantMetrics, TENANT_METRICS_PATH } from "./tenant-metrics.ts";
import { createStreamRevocations } from "./token-revocation.ts";

export interface AppOptions {
  deps: ApiDeps;
  auth: Authenticator;
  logger: Logger;
  /** Largest request message accepted, bytes (RESOURCE_EXHAUSTED above). Default 8 MiB. */
  maxRequestBytes?: number;
  /** The policy in force (reloaded on SIGHUP); the kernel reads it per decision. */
  policy?: PolicyStore;
  /** Limits on CreateRun's workspace archives; defaults in DEFAULT_WORKSPACE_LIMITS. */
  workspace?: Partial<WorkspaceLimits>;
  /** Origins allowed to call the API from a browser (--cors-origins); default none. */
  corsOrigins?: readonly string[];
  /** Where the web console's built files are (default internal/console/dist). */
  consoleDir?: string;
  /** The access log (--access-log): one line per RPC; undefined: off. */
  accessLog?: AccessLog;
  /**
   * The API rate of tokens without their own `rate:` (--rate-limit); undefined: only tokens
   * with a `rate:` are limited. Buckets are this process's own (each replica has its own).
   */
  rateLimit?: Rate;
}

/**
 * JSON request bodies are read strictly: an unknown field or enum name is refused
 * (INVALID_ARGUMENT) instead of dropped — a dropped `state` filter would silently list
 * every run — and a body that is not UTF-8 is refused instead of patched with U+FFFD.
 * connect's JSON serialisation takes its TextDecoder from these options
 * (createJsonSerialization), though its router type does not declare it.
 */
const STRICT_JSON = {
  ignoreUnknownFields: false,
  textDecoder: new TextDecoder("utf-8", { fatal: true }),
};

export const SERVICES = [
  "agentd.v1.RunService",
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
] as const;

export function createApp(opts: AppOptions): RequestHandler {
  const { deps, auth, logger } = opts;
  const logError = (err: unknown, incident?: string): void => {
    logger.error({ err, incident }, "request failed");
  };
  const ready = (): Promise<boolean> => logAnswers(deps.log);
  // One per server: its semaphore bounds the unpacks of every CreateRun this server serves.
  const uploader = createWorkspaceUploader(deps.artifacts, {
    ...DEFAULT_WORKSPACE_LIMITS,
    ...opts.workspace,
  });
  const watchErrors = edgeErrorGate(logError);
  const authenticate = authGate(auth);
  // Open RunService streams end with a status when an auth reload changes their token.
  const revocations = createStreamRevocations(auth);
  const access = opts.accessLog === undefined ? undefined : accessGate(opts.accessLog);
  const buckets = createTokenBuckets();
  const rates = { buckets, ...(opts.rateLimit === undefined ? {} : { fallback: opts.rateLimit }) };
  const limit = rateLimitGate(rates);
  // The SSE streams are API calls too: limited like a stream's open, right after auth.
  const sseAuth: Authenticator = {
    ...auth,
    authenticate(authorization) {
      const principal = auth.authenticate(authorization);
      const refusal = checkRate(rates, principal);
      if (refusal !== undefined) throw refusal;
      return principal;
    },
  };
  primeTenantSeries(auth.tenantIds?.() ?? []);
  const api = connectNodeAdapter({
    readMaxBytes: opts.maxRequestBytes ?? 8 * 1024 * 1024,
    interceptors: [
      ...(access === undefined ? [] : [accessInterceptor()]),
      traceInterceptor(),
      errorInterceptor(logError),
      revocations.interceptor,
      ...(deps.archive === undefined ? [] : [archivedReadOnlyInterceptor(deps.archive)]),
    ],
    // Runs before the body is read: errors connect raises itself (an undecodable body) are
    // made client-safe, and a caller without the right token is refused unread.
    requestGate: (ctx) => {
      watchErrors(ctx);
      access?.(ctx);
      try {
        authenticate(ctx);
      } catch (err) {
        throw toConnectError(err, logError);
      }
      limit(ctx);
    },
    jsonOptions: STRICT_JSON,
    contextValues: (req) => {
      const values = createContextValues();
      // StreamEvents' gRPC fast path writes pre-framed messages to the HTTP/2 stream itself.
      if ("stream" in req) values.set(kHttp2Stream, req.stream);
      values.set(kWorkspaceUploader, uploader);
      values.set(kPeer, req.socket?.remoteAddress ?? null);
      return values;
    },
    routes(router) {
      registerRunService(router, deps);
      registerHealth(router, { check: ready, services: ["agentd.v1.RunService"] });
      registerReflection(router, {
        files: [
          file_agentd_v1_run_service,
          file_agentd_v1_events,
          file_google_protobuf_timestamp,
          file_grpc_health_v1_health,
        ],
        services: SERVICES,
      });
    },
  });

  const origins = new Set(opts.corsOrigins ?? []);
  // Open streams are checked again whenever the auth file changes (revoked tokens cut).
  const live = createLiveStreams(auth);
  const reloadable = auth as Partial<ReloadableAuth>;
  reloadable.onReload?.(() => {
    // Removed tokens' buckets go; tenants the file now names get their series at 0.
    const tokens = auth.tokenIds?.();
    if (tokens !== undefined) buckets.retain((id) => tokens.has(id));
    primeTenantSeries(auth.tenantIds?.() ?? []);
    const ended = revocations.recheck();
    if (ended > 0) opts.logger.info({ streams: ended }, "ended streams whose token changed");
    const n = live.recheck();
    if (n > 0) opts.logger.info({ streams: n }, "cut streams whose token no longer reads");
  });
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://agentd");
    live.track(req, res, url.pathname);
    if (applyCors(req as http.IncomingMessage, res as http.ServerResponse, origins)) return;
    if (req.method === "GET" || req.method === "HEAD") {
      if (
        serveConsole(
          req as http.IncomingMessage,
          res as http.ServerResponse,
          url.pathname,
          opts.consoleDir,
        )
      )
        return;
      if (url.pathname === "/healthz") return json(res, 200, { status: "ok" });
      if (url.pathname === "/metrics") return void serveMetrics(res);
      if (url.pathname === TENANT_METRICS_PATH)
        return void serveTenantMetrics(auth, req.headers.authorization, res);
      if (url.pathname === "/readyz") {
        void ready().then((ok) =>
          json(
            res,
            ok ? 200 : 503,
            ok
              ? { status: "ready", eventLog: deps.log.kind }
              : { status: "not ready", reason: "event log unreachable" },
          ),
        );
        return;
      }
      if (url.pathname === WATCH_SSE_PATH && req.method === "GET")
        return void serveWatchSse(deps, sseAuth, req, res as unknown as Res, url, logError);
      const m = SSE_PATH.exec(url.pathname);
      if (m !== null && req.method === "GET") {
        void serveSse(
          deps,
          sseAuth,
          req,
          res as unknown as Res,
          decodeURIComponent(m[1] as string),
          url,
          logError,
        );
        return;
      }
    }
    api(req as http.IncomingMessage, res as http.ServerResponse);
  };
}

/** Whether the event log answers (a ping): what /readyz and gRPC health report. */
export async function logAnswers(log: EventLog): Promise<boolean> {
  try {
    await log.ping();
    return true;
  } catch {
    return false;
  }
}

/**
 * GET /metrics: Prometheus text format, unauthenticated like the probes (no run id, no
 * tenant id in it: per-tenant series are at /metrics/tenants, admin only).
 */
export async function serveMetrics(
  response: http.ServerResponse | http2.Http2ServerResponse,
): Promise<void> {
  const res = response as unknown as Res;
  try {
    const { contentType, body } = await scrape();
    res.writeHead(200, { "content-type": contentType });
    res.end(body);
  } catch {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end("metrics unavailable\n");
  }
}

/** A JSON answer (probes, the health port). */
export function json(
  response: http.ServerResponse | http2.Http2ServerResponse,
  status: number,
  body: unknown,
): void {
  const res = response as unknown as Res;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
