/**
 * The standard gRPC health service (grpc.health.v1.Health) for the connect-es server:
 * load balancers, Kubernetes probes and grpc-health-probe ask it whether we serve.
 * Check answers once; Watch streams the status and every later change until the client
 * goes away. The status comes from a caller-supplied check (e.g. "is Redis reachable").
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, type ConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";

/** Options of the health service. */
export interface HealthOptions {
  /** Resolves true when the server can serve; false (or a rejection) means NOT_SERVING. */
  check: () => Promise<boolean>;
  /** Fully-qualified names of the services that answer; "" (the whole server) always does. */
  services: readonly string[];
  /** How often Watch re-runs `check`, in milliseconds. Default 1000. */
  watchIntervalMs?: number;
}

const { SERVING, NOT_SERVING, SERVICE_UNKNOWN } = HealthCheckResponse_ServingStatus;

/** Builds the implementation of grpc.health.v1.Health over `opts.check`. */
export function createHealthService(opts: HealthOptions): ServiceImpl<typeof Health> {
  const known = new Set(["", ...opts.services]);
  const interval = opts.watchIntervalMs ?? 1000;

  const status = async (): Promise<HealthCheckResponse_ServingStatus> => {
    try {
      return (await opts.check()) ? SERVING : NOT_SERVING;
    } catch {
      return NOT_SERVING;
    }
  };

  return {
    async check(req) {
      if (!known.has(req.service)) {
        throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      }
      return { status: await status() };
    },

    async *watch(req, ctx) {
      if (!known.has(req.service)) {
        // Per the spec: report SERVICE_UNKNOWN and keep the stream open. Our service set
        // is fixed, so the status never changes; wait for the client to cancel.
        yield { status: SERVICE_UNKNOWN };
        await waitAbort(ctx.signal);
        return;
      }
      let last = await status();
      yield { status: last };
      while (!ctx.signal.aborted) {
        try {
          await sleep(interval, undefined, { signal: ctx.signal });
        } catch {
          return; // cancelled by the client
        }
        const now = await status();
        if (now !== last) {
          last = now;
          yield { status: now };
        }
      }
    },
  };
}

/** Registers grpc.health.v1.Health on `router`. */
export function registerHealth(router: ConnectRouter, opts: HealthOptions): ConnectRouter {
  return router.service(Health, createHealthService(opts));
}

/** Resolves once `signal` aborts. */
function waitAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true }),
  );
}
