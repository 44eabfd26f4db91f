/**
 * GET /metrics/tenants: the per-tenant series (agentd_tenant_limit, agentd_tenant_limit_used,
 * agentd_api_requests_limited_total; telemetry/metrics.ts tenantRegistry) in Prometheus text
 * format, for a bearer token with the admin role only (Prometheus: `authorization:
 * credentials_file:` in the scrape job). The unauthenticated /metrics carries no tenant id.
 *
 * Must never: answer a series to a caller without a valid admin token, or echo the caller's
 * header back.
 */
import type http from "node:http";
import type http2 from "node:http2";
import type { Authenticator, Principal } from "../auth/tokens.ts";
import { scrapeTenants } from "../telemetry/scrape.ts";

/** The path of the admin-only per-tenant metrics. */
export const TENANT_METRICS_PATH = "/metrics/tenants";

type Res = http.ServerResponse;

/** Serves the per-tenant series to an admin token; 401 without a valid token, 403 without admin. */
export async function serveTenantMetrics(
  auth: Authenticator,
  authorization: string | undefined,
  response: http.ServerResponse | http2.Http2ServerResponse,
): Promise<void> {
  const res = response as unknown as Res;
  let principal: Principal;
  try {
    principal = auth.authenticate(authorization);
  } catch {
    res.writeHead(401, { "content-type": "text/plain", "www-authenticate": "Bearer" });
    res.end("unauthenticated: /metrics/tenants needs a bearer token with the admin role\n");
    return;
  }
  if (!principal.roles.has("admin")) {
    res.writeHead(403, { "content-type": "text/plain" });
    res.end("permission denied: /metrics/tenants needs the 'admin' role\n");
    return;
  }
  try {
    const { contentType, body } = await scrapeTenants();
    res.writeHead(200, { "content-type": contentType });
    res.end(body);
  } catch {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end("metrics unavailable\n");
  }
}
