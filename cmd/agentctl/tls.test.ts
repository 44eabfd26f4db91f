/**
 * agentctl against a real `agentd dev --tls-cert --tls-key` whose certificate a private CA
 * signed: without the CA the failure is told as a certificate problem naming the address
 * (exit 4), not "failed internally"; --ca-file, AGENTD_CA_FILE and a context's ca-file
 * trust it; a bad CA file is a usage error naming it; TRACEPARENT reaches the server (the
 * run's run.queued carries its trace id).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import { type AgentdProcess, startAgentd } from "../../internal/testing/agentd-process.ts";
import { serverCerts } from "../../internal/testing/certs.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agentctl-tls-"));
let server: AgentdProcess;
let certs: ReturnType<typeof serverCerts>;
let url: string;

before(async () => {
  certs = serverCerts(join(dir, "ca"));
  // No model: the worker is off and runs stay queued.
  server = await startAgentd("dev", [
    "--data-dir",
    join(dir, "data"),
    "--tls-cert",
    certs.cert,
    "--tls-key",
    certs.key,
  ]);
  url = `https://127.0.0.1:${server.port}`;
});

after(async () => {
  await server?.stop().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

function ctl(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const e: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith("AGENTD_") && !k.startsWith("TRACE") && k !== "NODE_EXTRA_CA_CERTS") e[k] = v;
  e.AGENTCTL_CONFIG = join(dir, "no-config.yaml");
  Object.assign(e, env);
  const child = spawn(AGENTCTL, args, { env: e, cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

it("without the CA: a certificate problem naming the address, exit 4", async () => {
  const r = await ctl(["runs", "--addr", url]);
  assert.equal(r.code, 4, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(
      `cannot reach ${url.replace(/\./g, "\\.")} .*: certificate signed by an unknown authority \\(\\w+\\); pass --ca-file FILE .* or set NODE_EXTRA_CA_CERTS=FILE`,
    ),
  );
  assert.doesNotMatch(r.stderr, /failed internally|incident/);
});

it("--ca-file, AGENTD_CA_FILE, a context's ca-file and NODE_EXTRA_CA_CERTS trust the private CA", async () => {
  const flag = await ctl(["runs", "--addr", url, "--ca-file", certs.ca]);
  assert.equal(flag.code, 0, flag.stderr);
  const env = await ctl(["runs", "--addr", url], { AGENTD_CA_FILE: certs.ca });
  assert.equal(env.code, 0, env.stderr);
  const extra = await ctl(["runs", "--addr", url], { NODE_EXTRA_CA_CERTS: certs.ca });
  assert.equal(extra.code, 0, extra.stderr);
  const config = join(dir, "config", "config.yaml");
  mkdirSync(join(dir, "config"), { mode: 0o700 });
  const set = await ctl(
    ["config", "set-context", "private", "--server", url, "--ca-file", certs.ca],
    { AGENTCTL_CONFIG: config },
  );
  assert.equal(set.code, 0, set.stderr);
  const use = await ctl(["runs", "--context", "private"], { AGENTCTL_CONFIG: config });
  assert.equal(use.code, 0, use.stderr);
});

it("the wrong CA file: says it is not the CA that signed the certificate", async () => {
  const other = serverCerts(join(dir, "other-ca"));
  const r = await ctl(["runs", "--addr", url, "--ca-file", other.ca]);
  assert.equal(r.code, 4, r.stderr);
  assert.match(r.stderr, /certificate signed by an unknown authority/);
  assert.match(r.stderr, new RegExp(`${other.ca} \\(--ca-file\\) is not the CA that signed`));
});

it("a CA file that is missing or holds no certificate: a usage error naming it (exit 64)", async () => {
  const missing = await ctl(["runs", "--addr", url, "--ca-file", join(dir, "nope.pem")]);
  assert.equal(missing.code, 64);
  assert.match(missing.stderr, /--ca-file .*nope\.pem: cannot read it \(ENOENT\)/);
  writeFileSync(join(dir, "junk.pem"), "not a certificate\n");
  const junk = await ctl(["runs", "--addr", url], { AGENTD_CA_FILE: join(dir, "junk.pem") });
  assert.equal(junk.code, 64);
  assert.match(junk.stderr, /AGENTD_CA_FILE .*junk\.pem: no PEM certificate in it/);
});

it("TRACEPARENT from the environment: the run joins that trace; a malformed one is refused", async () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;
  const ws = join(dir, "ws");
  mkdirSync(ws, { recursive: true });
  writeFileSync(join(ws, "a.txt"), "a\n");
  const run = await ctl(
    ["run", "--addr", url, "--ca-file", certs.ca, "--repo", ws, "--prompt", "x", "--no-wait"],
    { TRACEPARENT: traceparent, TRACESTATE: "vendor=1" },
  );
  assert.equal(run.code, 0, run.stderr);
  const runId = run.stdout.trim();
  const ev = await ctl(["events", runId, "--json", "--addr", url, "--ca-file", certs.ca]);
  assert.equal(ev.code, 0, ev.stderr);
  const queued = JSON.parse(ev.stdout.split("\n")[0] as string);
  assert.equal(queued.type, "run.queued");
  assert.match(
    JSON.stringify(queued.payload ?? queued),
    new RegExp(`"traceParent":"00-${traceId}-[0-9a-f]{16}-01"`),
  );
  const bad = await ctl(["runs", "--addr", url, "--ca-file", certs.ca], {
    TRACEPARENT: "not-a-trace",
  });
  assert.equal(bad.code, 64);
  assert.match(bad.stderr, /TRACEPARENT: traceparent "not-a-trace": not a W3C traceparent/);
});
