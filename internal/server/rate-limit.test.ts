/**
 * Per-token API rate limits against a real `agentd server` over real clients in each
 * protocol it serves (gRPC over HTTP/2, Connect, gRPC-Web): a token at 2/s is refused its
 * third immediate call with RESOURCE_EXHAUSTED and a google.rpc.RetryInfo; waiting that delay
 * is enough; another token is unaffected; the server's --rate-limit holds tokens without
 * their own rate; health is never limited; refusals are counted per tenant in /metrics/tenants (admin).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { type AgentdProcess, sha256Hex, startAgentd } from "../testing/agentd-process.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-ratelimit-"));
let server: AgentdProcess;

const ADMIN = "tok-admin-metrics";
/** token → [tenant, rate line or ""]. */
const TOKENS: Record<string, [string, string]> = {
  "tok-grpc": ["acme", "{perSecond: 2, burst: 2}"],
  "tok-connect": ["acme", "{perSecond: 2, burst: 2}"],
  "tok-web": ["acme", "{perSecond: 2, burst: 2}"],
  "tok-free": ["acme", "{perSecond: 100000, burst: 100000}"],
  "tok-default": ["globex", ""],
  "tok-sse": ["acme", "{perSecond: 0.01, burst: 1}"],
};

before(async () => {
  const auth = join(dir, "auth.yaml");
  const lines = Object.entries(TOKENS).map(
    ([token, [tenant, rate]]) =>
      `  - sha256: ${sha256Hex(token)}\n    tenant: ${tenant}\n    roles: [read]\n${rate === "" ? "" : `    rate: ${rate}\n`}`,
  );
  // An admin token of its own (no rate): it reads the per-tenant series (/metrics/tenants).
  const admin = `  - sha256: ${sha256Hex(ADMIN)}\n    tenant: ops\n    roles: [admin]\n`;
  writeFileSync(auth, `tokens:\n${lines.join("")}${admin}tenants:\n  initech: {}\n`);
  server = await startAgentd("server", [
    "--event-log",
    `file:${join(dir, "log")}`,
    "--artifact-dir",
    join(dir, "artifacts"),
    "--auth-file",
    auth,
    // Tokens without a rate: of their own: one request a minute.
    "--rate-limit",
    "1/m,burst=1",
  ]);
});

after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const PROTOCOLS: Record<string, (url: string) => Transport> = {
  grpc: (baseUrl) => createGrpcTransport({ baseUrl }),
  connect: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }),
  web: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
};

function client(protocol: string) {
  return createClient(RunService, (PROTOCOLS[protocol] as (u: string) => Transport)(server.url));
}

/** A ListRuns with `token`: ok, or the ConnectError it failed with. */
async function call(protocol: string, token: string): Promise<"ok" | ConnectError> {
  const c = client(protocol);
  try {
    await c.listRuns({}, { headers: { authorization: `Bearer ${token}` } });
    return "ok";
  } catch (err) {
    return ConnectError.from(err);
  }
}

/** The RetryInfo delay of a refusal, in ms. */
function retryDelayMs(err: ConnectError): number {
  const [info] = err.findDetails(RetryInfoSchema);
  assert.ok(info?.retryDelay, `RESOURCE_EXHAUSTED without RetryInfo: ${err.message}`);
  return Number(info.retryDelay.seconds) * 1000 + info.retryDelay.nanos / 1e6;
}

describe("per-token API rate limits, over a real server", { timeout: 240_000 }, () => {
  for (const protocol of Object.keys(PROTOCOLS)) {
    it(`${protocol}: the third immediate call of a 2/s token is RESOURCE_EXHAUSTED with RetryInfo, and its delay is enough`, async () => {
      const token = `tok-${protocol}`;
      // At once, so that no refill comes between them.
      const results = await Promise.all([1, 2, 3].map(() => call(protocol, token)));
      const refused = results.filter((r): r is ConnectError => r !== "ok");
      assert.equal(results.filter((r) => r === "ok").length, 2, results.map(String).join("; "));
      assert.equal(refused.length, 1);
      const err = refused[0] as ConnectError;
      assert.equal(err.code, Code.ResourceExhausted, err.message);
      assert.match(err.rawMessage, /rate limit/);
      const delay = retryDelayMs(err);
      assert.ok(
        delay > 0 && delay <= 500,
        `a 2/s token's next request is at most 500 ms away, got ${delay}`,
      );
      // Another token of the same tenant goes on meanwhile.
      for (let i = 0; i < 10; i++) assert.equal(await call(protocol, "tok-free"), "ok");
      // Honouring the delay is enough: the next call is served.
      await sleep(delay);
      assert.equal(await call(protocol, token), "ok");
    });
  }

  it("a token without its own rate gets the server's --rate-limit (1/m): refused the second call, retry in about a minute", async () => {
    assert.equal(await call("connect", "tok-default"), "ok");
    const r = await call("grpc", "tok-default");
    assert.ok(r instanceof ConnectError, "the second call within a minute is refused");
    assert.equal(r.code, Code.ResourceExhausted);
    const delay = retryDelayMs(r);
    assert.ok(delay > 30_000 && delay <= 60_000, `retry in ≤ 60 s, got ${delay}`);
  });

  it("the check comes before the body is read: an exhausted token's 9 MiB body is refused for its rate", async () => {
    const body = Buffer.alloc(9 * 1024 * 1024, 0x20); // whitespace: valid JSON padding
    const res = await fetch(`${server.url}/agentd.v1.RunService/ListRuns`, {
      method: "POST",
      headers: { authorization: "Bearer tok-default", "content-type": "application/json" },
      body,
    });
    assert.equal(res.status, 429);
    const err = (await res.json()) as { code: string; message: string };
    assert.equal(err.code, "resource_exhausted");
    assert.match(err.message, /rate limit/);
  });

  it("SSE streams count too: the second open within the rate is 429 with Retry-After", async () => {
    const open = (path: string) =>
      fetch(`${server.url}${path}`, { headers: { authorization: "Bearer tok-sse" } });
    const first = await open("/v1/runs/01JDX2Q8Z5K3V7M9N1P4R6S8T0/events");
    assert.equal(first.status, 404, "the first open is served (no such run)");
    await first.body?.cancel();
    const second = await open("/v1/events");
    assert.equal(second.status, 429);
    assert.equal(((await second.json()) as { code: string }).code, "resource_exhausted");
    const after = Number(second.headers.get("retry-after"));
    assert.ok(after > 50 && after <= 100, `Retry-After ${after} s for 0.01/s`);
  });

  it("health is never limited, even for a caller that is", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    for (let i = 0; i < 20; i++) {
      const r = await health.check({});
      assert.equal(r.status, 1, "SERVING");
    }
  });

  it("/metrics/tenants counts refusals per tenant; a tenant named only in tenants: has its series at 0", async () => {
    const text = await (
      await fetch(`${server.url}/metrics/tenants`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      })
    ).text();
    const value = (tenant: string) =>
      Number(
        new RegExp(`^agentd_api_requests_limited_total\\{tenant="${tenant}"\\} (\\d+)`, "m").exec(
          text,
        )?.[1] ?? Number.NaN,
      );
    assert.ok(value("acme") >= 3, `acme: ${value("acme")}`);
    assert.ok(value("globex") >= 1, `globex: ${value("globex")}`);
    assert.equal(value("initech"), 0);
  });
});
