/**
 * Per-tenant metrics behind an admin token, against a real `agentd server` (a private
 * redis-server): the unauthenticated /metrics carries no `tenant` label at all (every line
 * checked, not only the known metrics); /metrics/tenants answers 401 without a valid bearer
 * token (hostile headers included: quotes, a very long value, a token of another
 * server), 403 to a token without the admin role, and the per-tenant series — every limit's
 * capacity and use, the rate-limit counter — for every tenant of the auth file to an admin.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";

let s: Stack;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.stop();
});

const get = (path: string, authorization?: string) =>
  fetch(
    `${s.server.url}${path}`,
    authorization === undefined ? {} : { headers: { authorization } },
  );

describe("per-tenant metrics", { timeout: 120_000 }, () => {
  it("GET /metrics has no tenant label on any series", async () => {
    const res = await get("/metrics");
    assert.equal(res.status, 200);
    const body = await res.text();
    const labelled = body.split("\n").filter((l) => !l.startsWith("#") && /[{,]tenant="/.test(l));
    assert.deepEqual(labelled, []);
    for (const t of ["acme", "globex", "initech"])
      assert.ok(!body.includes(`"${t}"`), `the tenant id ${t} appears in /metrics`);
    assert.doesNotMatch(body, /agentd_tenant_limit|agentd_api_requests_limited_total/);
  });

  it("GET /metrics/tenants refuses a missing, malformed or foreign token (401) and a non-admin (403)", async () => {
    const hostile = [
      undefined,
      "",
      "Bearer ",
      'Bearer "acme"',
      `Bearer ${"x".repeat(4 * 1024)}`,
      "Basic YWRtaW46YWRtaW4=",
      `Bearer ${TOKENS.acme}x`,
    ];
    for (const h of hostile) {
      const res = await get("/metrics/tenants", h);
      const body = await res.text();
      assert.equal(res.status, 401, `authorization ${JSON.stringify(h?.slice(0, 40))}`);
      assert.doesNotMatch(body, /tenant="/);
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
    }
    // Past Node's header limit the server refuses it before any handler (431).
    const huge = await get("/metrics/tenants", `Bearer ${"x".repeat(64 * 1024)}`);
    assert.ok([401, 431].includes(huge.status), String(huge.status));
    assert.doesNotMatch(await huge.text(), /tenant="/);
    const reader = await get("/metrics/tenants", `Bearer ${TOKENS.acmeReader}`);
    assert.equal(reader.status, 403);
    assert.match(await reader.text(), /'admin' role/);
  });

  it("an admin token reads every tenant's limit use and rate-limit counter, at 0 from the start", async () => {
    const res = await get("/metrics/tenants", `Bearer ${TOKENS.globex}`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
    const body = await res.text();
    for (const t of ["acme", "globex", "initech"]) {
      assert.match(
        body,
        new RegExp(`^agentd_tenant_limit\\{tenant="${t}",limit="concurrentRuns"\\} \\d+$`, "m"),
      );
      assert.match(
        body,
        new RegExp(`^agentd_tenant_limit_used\\{tenant="${t}",limit="concurrentRuns"\\} 0$`, "m"),
      );
      assert.match(
        body,
        new RegExp(`^agentd_api_requests_limited_total\\{tenant="${t}"\\} 0$`, "m"),
      );
    }
    // Only the per-tenant series: the process metrics stay on /metrics.
    assert.doesNotMatch(body, /agentd_runs_created_total|process_cpu/);
  });
});
