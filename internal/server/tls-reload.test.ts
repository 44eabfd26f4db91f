/**
 * `agentd server --tls-cert --tls-key` (HTTP/2 for gRPC and HTTP/1.1 for probes, by ALPN),
 * and what changes without a restart: the auth file (a file watch and SIGHUP; a broken file
 * keeps the last good tokens) and the certificate (SIGHUP). Bad TLS flags stop the start
 * with one line.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import {
  AGENTD_BIN,
  type AgentdProcess,
  startAgentd,
  writeAuthFile,
} from "../testing/agentd-process.ts";
import { serverCerts } from "../testing/certs.ts";
import { GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-tls-"));
const live = { cert: join(dir, "live-cert.pem"), key: join(dir, "live-key.pem") };
let redis: TestRedis;
let server: AgentdProcess;
let first: ReturnType<typeof serverCerts>;
const tokenA = "token-a-0123456789";
const tokenB = "token-b-0123456789";
const authFile = join(dir, "auth", "auth.yaml");

before(async () => {
  first = serverCerts(join(dir, "ca1"));
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  rmSync(join(dir, "auth"), { recursive: true, force: true });
  writeAuthFile(mkdirp(join(dir, "auth")), [
    { token: tokenA, tenant: "acme", roles: ["read", "submit"] },
  ]);
  redis = await startRedis();
  server = await startAgentd("server", [
    "--event-log",
    redis.url,
    "--artifact-dir",
    join(dir, "artifacts"),
    "--listen",
    "127.0.0.1:0",
    "--auth-file",
    authFile,
    "--tls-cert",
    live.cert,
    "--tls-key",
    live.key,
  ]);
});

after(async () => {
  await server?.stop().catch(() => undefined);
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function mkdirp(p: string): string {
  spawnSync("mkdir", ["-p", p]);
  return p;
}

/** ListRuns over gRPC+TLS trusting `ca`: the status code (0 = OK). */
async function listRuns(token: string, ca: string): Promise<number> {
  const client = new GrpcRunClient(server.addr, token, readFileSync(ca));
  try {
    await client.listRuns({});
    return 0;
  } catch (err) {
    return (err as grpc.ServiceError).code;
  } finally {
    client.close();
  }
}

function readyz(ca: string): Promise<number> {
  return new Promise((resolve, reject) => {
    https
      .get(`https://127.0.0.1:${server.port}/readyz`, { ca: readFileSync(ca) }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on("error", reject);
  });
}

async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 120_000; // generous: a loaded machine never fails it
  while (!(await probe())) {
    if (Date.now() > deadline)
      throw new Error(`waited 120 s for ${what}\n${server.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

it("gRPC (h2) and /readyz (HTTP/1.1) over TLS on one port", async () => {
  assert.equal(await listRuns(tokenA, first.ca), 0);
  assert.equal(await readyz(first.ca), 200);
  // A plaintext client gets nothing from a TLS port.
  const plain = new GrpcRunClient(server.addr, tokenA);
  await assert.rejects(
    plain.listRuns({}),
    (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE,
  );
  plain.close();
});

it("the auth file changes without a restart: a watch picks it up; a broken one keeps the last good", async () => {
  writeAuthFile(join(dir, "auth"), [{ token: tokenB, tenant: "acme", roles: ["read"] }]);
  await until("token B accepted", async () => (await listRuns(tokenB, first.ca)) === 0);
  assert.equal(await listRuns(tokenA, first.ca), grpc.status.UNAUTHENTICATED, "token A revoked");
  writeFileSync(authFile, "tokens: [ {broken");
  await until("the failed reload logged", async () =>
    server.output().includes("auth file reload failed"),
  );
  assert.equal(await listRuns(tokenB, first.ca), 0, "the last good tokens stay");
  // SIGHUP reloads too.
  writeAuthFile(join(dir, "auth"), [{ token: tokenA, tenant: "acme", roles: ["read"] }]);
  process.kill(server.pid, "SIGHUP");
  await until("token A back", async () => (await listRuns(tokenA, first.ca)) === 0);
});

it("SIGHUP swaps the certificate for new connections", async () => {
  const second = serverCerts(join(dir, "ca2"));
  copyFileSync(second.cert, live.cert);
  copyFileSync(second.key, live.key);
  process.kill(server.pid, "SIGHUP");
  await until("the new certificate served", async () => (await listRuns(tokenA, second.ca)) === 0);
  assert.notEqual(await listRuns(tokenA, first.ca), 0, "the old CA no longer verifies it");
  assert.match(server.output(), /TLS certificate reloaded/);
});

it("bad TLS flags stop the start with one line", () => {
  const run = (...flags: string[]) =>
    spawnSync(AGENTD_BIN, ["server", "--event-log", redis.url, "--insecure-no-auth", ...flags], {
      encoding: "utf8",
      timeout: 120_000,
    });
  const alone = run("--tls-cert", first.cert);
  assert.equal(alone.status, 2);
  assert.match(
    alone.stderr,
    /--tls-cert \(AGENTD_TLS_CERT\) and --tls-key \(AGENTD_TLS_KEY\) go together/,
  );
  const other = serverCerts(join(dir, "ca3"));
  const mismatched = run("--tls-cert", first.cert, "--tls-key", other.key);
  assert.equal(mismatched.status, 1);
  assert.match(
    mismatched.stderr,
    /^agentd: --tls-cert\/--tls-key: .*(key values mismatch|KEY_VALUES_MISMATCH)/im,
  );
  const missing = run("--tls-cert", "/nonexistent.pem", "--tls-key", first.key);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /ENOENT/);
});
