/**
 * The worker's health port (`agentd worker --listen HOST:PORT`): plain HTTP/1.1 serving
 * GET /healthz (the process answers), /readyz (it can take work: the event log answers in
 * time and it is not stopping) and /metrics. Nothing else: no API, no run data. Must never:
 * let a probe hang on a dependency (each check has a deadline).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { withDeadline } from "../deadline.ts";
import { json, serveMetrics } from "./app.ts";
import { listenOn } from "./listen.ts";

export interface HealthPortOptions {
  /** Resolves when the worker can take work; a rejection or false is "not ready". */
  ready: () => Promise<boolean>;
  /** The most a readiness check may take, ms. Default 1000. */
  readyDeadlineMs?: number;
}

export interface HealthPort {
  listen(host: string, port: number): Promise<AddressInfo>;
  close(): Promise<void>;
}

export function createHealthPort(opts: HealthPortOptions): HealthPort {
  const deadline = opts.readyDeadlineMs ?? 1000;
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://agentd").pathname;
    if (req.method !== "GET" && req.method !== "HEAD") return json(res, 405, { error: "GET only" });
    if (path === "/healthz") return json(res, 200, { status: "ok" });
    if (path === "/metrics") return void serveMetrics(res);
    if (path === "/readyz")
      return void withDeadline(
        opts.ready().catch(() => false),
        deadline,
        () => false,
      ).then((ok) => json(res, ok ? 200 : 503, ok ? { status: "ready" } : { status: "not ready" }));
    json(res, 404, { error: "not found: /healthz, /readyz and /metrics are served here" });
  });
  server.keepAliveTimeout = 5000;
  return {
    listen: (host, port) => listenOn(server, host, port),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
