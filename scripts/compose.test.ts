/**
 * deploy/compose/docker-compose.yml with Debian's docker-compose, end to end, on the images
 * `make image images` built:
 *
 * - up (Redis with AOF, two servers, two workers on the host's engine), `agentctl run` on
 *   the example repository until its patch waits for a person, the worker holding the run
 *   killed, the approval given, the run completed by the other worker; `down -v` leaves no
 *   container, volume or network behind;
 * - an allowlist run (policy sandbox.network: allowlist) through the composed worker: the
 *   replay model's process.run fetches an allowed host (an HTTP server this test starts on
 *   the host's loopback, named in the policy's network.private) through the run's egress
 *   proxy, and is refused a host the policy does not list; both are network.request events,
 *   and nothing reached the refused host.
 * - Redis as operators run it: no start without AGENTD_REDIS_PASSWORD; the ACL user's
 *   password only from the environment (not on Redis's command line); maxmemory with
 *   noeviction and protected mode really set; no way in without the password.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { parse, stringify } from "yaml";
import { LABEL_RUN } from "../internal/sandbox/docker-sandbox.ts";
import { freePort } from "../internal/testing/prometheus.ts";
import { until } from "../internal/testing/until.ts";

/** True when `url` answers 200 (false on any other status or a refused connection). */
const answers200 = (url: string): Promise<boolean> =>
  fetch(url).then(
    (x) => x.status === 200,
    () => false,
  );

const ROOT = join(import.meta.dirname, "..");
const COMPOSE = join(ROOT, "deploy", "compose", "docker-compose.yml");
const AGENTCTL = join(ROOT, "bin", "agentctl");
const TOKEN = "agentd-compose-demo-token-change-me"; // deploy/compose/auth.example.yaml's
const PROMPT =
  "The test suite of this repository fails. Find the bug, fix it with a minimal patch, and make sure all tests pass.";
const REDIS_PASSWORD = "composeTestRedisPw7731";
const tmp = mkdtempSync(join(tmpdir(), "agentd-compose-"));
const servers: net.Server[] = [];

/** One composed deployment: its project name, its files and the environment of compose. */
interface Deployment {
  project: string;
  files: string[];
  env: NodeJS.ProcessEnv;
  port: number;
}
const live = new Set<Deployment>();

function compose(d: Deployment, ...args: string[]) {
  return spawnSync(
    "docker-compose",
    [...d.files.flatMap((f) => ["-f", f]), "-p", d.project, ...args],
    { env: d.env, encoding: "utf8", timeout: 180_000 },
  );
}

function agentctl(port: number, ...args: string[]) {
  return spawnSync(AGENTCTL, args, {
    env: { ...process.env, AGENTD_ADDR: `http://127.0.0.1:${port}`, AGENTD_TOKEN: TOKEN },
    encoding: "utf8",
    timeout: 120_000,
    cwd: ROOT,
  });
}

/** agentctl without blocking this process (its own servers keep answering meanwhile). */
function agentctlAsync(
  port: number,
  ...args: string[]
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(AGENTCTL, args, {
      env: { ...process.env, AGENTD_ADDR: `http://127.0.0.1:${port}`, AGENTD_TOKEN: TOKEN },
      cwd: ROOT,
      timeout: 180_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => {
      stdout += b.toString("utf8");
    });
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString("utf8");
    });
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

const labelled = (project: string, kind: "ps" | "volume" | "network") => {
  const args =
    kind === "ps"
      ? ["ps", "-aq", "--filter", `label=com.docker.compose.project=${project}`]
      : [kind, "ls", "-q", "--filter", `label=com.docker.compose.project=${project}`];
  return spawnSync("docker", args, { encoding: "utf8" }).stdout.trim();
};

after(() => {
  for (const d of live) compose(d, "down", "-v", "--remove-orphans");
  for (const s of servers) s.close();
  rmSync(tmp, { recursive: true, force: true });
});

/**
 * `up -d` of the compose file (with `override` files, and only `services` when given) as
 * project agentdtestPID-NAME, on free ports; resolves once server-1 answers /readyz.
 */
async function up(
  name: string,
  extra: NodeJS.ProcessEnv,
  override: string[] = [],
  services: string[] = [],
): Promise<Deployment> {
  const image = readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  const port = await freePort();
  const d: Deployment = {
    project: `agentdtest${process.pid}${name}`,
    files: [COMPOSE, ...override],
    port,
    env: {
      ...process.env,
      AGENTD_IMAGE: image,
      AGENTD_REDIS_IMAGE: "agentd-redis:latest",
      AGENTD_PORT: String(port),
      AGENTD_PORT_2: String(await freePort()),
      AGENTD_REDIS_PORT: String(await freePort()),
      AGENTD_HEALTH_PORT: String(await freePort()),
      AGENTD_HEALTH_PORT_2: String(await freePort()),
      AGENTD_LEASE_TTL_MS: "3000",
      AGENTD_REDIS_PASSWORD: REDIS_PASSWORD,
      DOCKER_GID: String(statSync("/var/run/docker.sock").gid),
      OPENAI_API_KEY: "",
      OPENAI_BASE_URL: "",
      ...extra,
    },
  };
  live.add(d);
  const r = compose(d, "up", "-d", ...services);
  assert.equal(r.status, 0, r.stderr);
  await until(
    "the server's /readyz answers 200",
    () => answers200(`http://127.0.0.1:${port}/readyz`),
    {
      everyMs: 250,
      detail: () => compose(d, "logs", "--tail", "20").stdout,
    },
  );
  return d;
}

/** `down -v`, then nothing of the project is left (containers, volumes, networks). */
function down(d: Deployment) {
  const r = compose(d, "down", "-v");
  assert.equal(r.status, 0, r.stderr);
  assert.equal(labelled(d.project, "ps"), "", "no container");
  assert.equal(labelled(d.project, "volume"), "", "no volume");
  assert.equal(labelled(d.project, "network"), "", "no network");
  live.delete(d);
}

/** The run's events, as parsed NDJSON. */
// biome-ignore lint/suspicious/noExplicitAny: protobuf-JSON events
function eventsOf(port: number, runId: string): any[] {
  const out = agentctl(port, "events", runId, "--json").stdout;
  return out
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}

async function untilFinished(d: Deployment, runId: string): Promise<string> {
  let state = "";
  const until = Date.now() + 120_000;
  while (Date.now() < until) {
    state = /"state":\s*"(\w+)"/.exec(agentctl(d.port, "get", runId, "--json").stdout)?.[1] ?? "";
    if (/completed|failed|cancelled/i.test(state)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  return state;
}

it("Redis: a password from the environment, maxmemory with noeviction, protected mode, nobody in without it", {
  timeout: 300_000,
}, async () => {
  const bare = spawnSync("docker-compose", ["-f", COMPOSE, "config"], {
    env: { ...process.env, AGENTD_REDIS_PASSWORD: "" },
    encoding: "utf8",
  });
  assert.notEqual(bare.status, 0, "rendered without a Redis password");
  assert.match(bare.stderr, /set AGENTD_REDIS_PASSWORD/);
  const port = await freePort();
  const d: Deployment = {
    project: `agentdtest${process.pid}redis`,
    files: [COMPOSE],
    port: 0,
    env: {
      ...process.env,
      AGENTD_REDIS_IMAGE: "agentd-redis:latest",
      AGENTD_REDIS_PORT: String(port),
      AGENTD_REDIS_PASSWORD: REDIS_PASSWORD,
      AGENTD_REDIS_MAXMEMORY: "300mb",
    },
  };
  live.add(d);
  const r = compose(d, "up", "-d", "redis");
  assert.equal(r.status, 0, r.stderr);
  const cli = (...args: string[]) =>
    compose(d, "exec", "-T", "redis", "sh", "-c", `redis-cli ${args.join(" ")}`).stdout.trim();
  const authed = (...args: string[]) =>
    cli(`--user agentd --pass "$REDIS_PASSWORD" --no-auth-warning`, ...args);
  await until("Redis answers the agentd user's PING", () => authed("ping") === "PONG", {
    everyMs: 250,
    detail: () => compose(d, "logs").stdout,
  });
  const memory = authed("info", "memory");
  assert.match(memory, /^maxmemory:314572800\r?$/m, "maxmemory 300mb");
  assert.match(memory, /^maxmemory_policy:noeviction\r?$/m);
  assert.match(cli("ping"), /NOAUTH/, "no way in without the password");
  assert.match(
    cli("--user agentd --pass wrong --no-auth-warning ping"),
    /NOAUTH/,
    "nor with a wrong one",
  );
  assert.match(authed("config", "get", "protected-mode"), /NOPERM/, "agentd's user is no admin");
  // Not in the container's command (docker inspect, ps): only in its environment.
  const id = compose(d, "ps", "-q", "redis").stdout.trim();
  // Its healthcheck logs in as agentd too (generous: only a check that never passes fails).
  const health = () =>
    spawnSync("docker", ["inspect", "-f", "{{.State.Health.Status}}", id], {
      encoding: "utf8",
    }).stdout.trim();
  await until("Redis's healthcheck passes", () => health() === "healthy", {
    capMs: 180_000,
    everyMs: 250,
    detail: () => `health: ${health()}`,
  });
  const args = spawnSync("docker", ["inspect", "-f", "{{json .Config.Cmd}}", id], {
    encoding: "utf8",
  }).stdout;
  assert.match(args, /--protected-mode yes/);
  assert.match(args, /--maxmemory-policy noeviction/);
  assert.doesNotMatch(args, new RegExp(REDIS_PASSWORD), "the password is not on a command line");
  down(d);
});

it("up; a run through it survives its worker killed; down -v leaves nothing", {
  timeout: 400_000,
}, async () => {
  const d = await up("takeover", {
    AGENTD_POLICY: join(ROOT, "examples", "fix-failing-test", "agentd-policy.yaml"),
  });
  const port = d.port;
  // The run stops at its approval (the example's policy asks a person for the patch).
  const run = agentctl(
    port,
    "run",
    "--repo",
    "examples/fix-failing-test",
    "--prompt",
    PROMPT,
    "--follow",
    "--no-wait",
  );
  assert.equal(
    run.status,
    3,
    `${run.stdout}\n${run.stderr}\n${compose(d, "logs", "--tail", "30").stdout}`,
  );
  const approval = /agentctl approve (apr_(\w+)_\w+)/.exec(run.stderr);
  assert.ok(approval, run.stderr);
  const runId = approval[2] as string;
  // Kill the worker that holds the run (its id is hostname:pid; the hostname names the service).
  const started = agentctl(port, "events", runId, "--json");
  const holder = /"workerId":"agentd-(worker-\d):\d+"/.exec(started.stdout)?.[1];
  assert.ok(holder, started.stdout.slice(0, 2000));
  const container = compose(d, "ps", "-q", holder).stdout.trim();
  assert.ok(container, `the container of ${holder}`);
  const kill = spawnSync("docker", ["kill", container], { encoding: "utf8" });
  assert.equal(kill.status, 0, kill.stderr);
  const ok = agentctl(port, "approve", approval[1] as string, "--reason", "compose test");
  assert.equal(ok.status, 0, ok.stderr);
  const state = await untilFinished(d, runId);
  const events = agentctl(port, "events", runId, "--json").stdout;
  assert.match(
    state,
    /completed/i,
    `${state}\n${events.slice(-3000)}\n${compose(d, "logs", "--tail", "30").stdout}`,
  );
  assert.match(events, /"name":"patch"/, "the patch artifact");
  const workers = new Set(
    [...events.matchAll(/"workerId":"(agentd-worker-\d):\d+"/g)].map((m) => m[1]),
  );
  assert.ok(workers.size >= 2, `driven by two workers: ${[...workers].join(", ")}`);
  // Down: nothing of the project is left.
  down(d);
  const sandboxes = spawnSync("docker", ["ps", "-aq", "--filter", `label=${LABEL_RUN}=${runId}`], {
    encoding: "utf8",
  });
  assert.equal(sandboxes.stdout.trim(), "", "no sandbox of the run");
});

const SENTINEL = join(ROOT, "deploy", "compose", "docker-compose.sentinel.yml");

/** `SENTINEL …` asked of a sentinel inside its container (with the sentinels' password). */
function sentinel(d: Deployment, ...args: string[]): string {
  return sentinelOf(d, "sentinel-1", ...args);
}

function sentinelOf(d: Deployment, service: string, ...args: string[]): string {
  const cmd = `REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli -p 26379 sentinel ${args.join(" ")}`;
  return compose(d, "exec", "-T", service, "sh", "-c", cmd).stdout.trim();
}

/** How many entries of `kind` (replicas, sentinels) a sentinel lists for the master. */
function known(d: Deployment, service: string, kind: string): number {
  return (sentinelOf(d, service, kind, "agentd").match(/^name\s*$/gm) ?? []).length;
}

it("Redis with failover (docker-compose.sentinel.yml): the primary killed under a waiting run; the run completes, nothing acknowledged is lost, the chain verifies", {
  timeout: 500_000,
}, async () => {
  const d = await up(
    "sentinel",
    {
      AGENTD_POLICY: join(ROOT, "examples", "fix-failing-test", "agentd-policy.yaml"),
      AGENTD_SENTINEL_PORT: String(await freePort()),
      AGENTD_SENTINEL_PORT_2: String(await freePort()),
      AGENTD_SENTINEL_PORT_3: String(await freePort()),
      AGENTD_SENTINEL_DOWN_AFTER_MS: "2000",
    },
    [SENTINEL],
  );
  const port = d.port;
  // A failover needs a quorum: every sentinel must know both replicas and the two others.
  const SENTINELS = ["sentinel-1", "sentinel-2", "sentinel-3"];
  await until(
    "every sentinel knows both replicas and the other two sentinels",
    () => SENTINELS.every((x) => known(d, x, "replicas") === 2 && known(d, x, "sentinels") === 2),
    {
      everyMs: 500,
      detail: () =>
        SENTINELS.map(
          (x) => `${x}: ${known(d, x, "replicas")} replicas, ${known(d, x, "sentinels")} sentinels`,
        ).join("; "),
    },
  );
  const first = sentinel(d, "get-master-addr-by-name", "agentd").split("\n")[0];
  // agentd's user reaches its own keys only.
  const denied = compose(
    d,
    "exec",
    "-T",
    "redis",
    "sh",
    "-c",
    'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli --user agentd set not-agentd 1',
  );
  assert.match(denied.stdout, /NOPERM/, "a key outside agentd: is refused");
  const run = agentctl(
    port,
    "run",
    "--repo",
    "examples/fix-failing-test",
    "--prompt",
    PROMPT,
    "--follow",
    "--no-wait",
  );
  assert.equal(
    run.status,
    3,
    `${run.stdout}\n${run.stderr}\n${compose(d, "logs", "--tail", "30").stdout}`,
  );
  const approval = /agentctl approve (apr_(\w+)_\w+)/.exec(run.stderr);
  assert.ok(approval, run.stderr);
  const runId = approval[2] as string;
  const before = eventsOf(port, runId);
  assert.ok(before.length > 5, `events acknowledged before the failover: ${before.length}`);
  // The primary dies; the sentinels promote a replica.
  const primary = compose(d, "ps", "-q", "redis").stdout.trim();
  assert.equal(spawnSync("docker", ["kill", primary]).status, 0);
  await until(
    "the sentinels name a new primary",
    () => {
      const now = sentinel(d, "get-master-addr-by-name", "agentd").split("\n")[0];
      return now !== "" && now !== first;
    },
    {
      everyMs: 500,
      detail: () =>
        `${compose(d, "logs", "--no-color", "sentinel-1", "sentinel-2", "sentinel-3")
          .stdout.split("\n")
          .filter((l) =>
            /[+-](sdown|odown|try-failover|vote|elected|failover|switch|sentinel|slave)/.test(l),
          )
          .slice(-40)
          .join("\n")}`,
    },
  );
  // The approval goes through the new primary (retried while the servers reconnect).
  let approve = { status: -1 as number | null, stderr: "" };
  await until(
    "the approval is accepted after the failover",
    () => {
      approve = agentctl(port, "approve", approval[1] as string, "--reason", "after failover");
      return approve.status === 0 || /already|resolved/i.test(approve.stderr);
    },
    { everyMs: 1000, detail: () => approve.stderr },
  );
  const state = await untilFinished(d, runId);
  const after = eventsOf(port, runId);
  assert.match(state, /completed/i, `${state}\n${JSON.stringify(after.slice(-5))}`);
  // Every event acknowledged before the failover is there, unchanged.
  assert.deepEqual(
    after.slice(0, before.length),
    before,
    "an acknowledged event was lost or changed",
  );
  const verify = agentctl(port, "verify", runId);
  assert.equal(verify.status, 0, `${verify.stdout}\n${verify.stderr}`);
  // The old primary, started again, follows the new one.
  assert.equal(spawnSync("docker", ["start", primary]).status, 0);
  await until(
    "the old primary rejoins as a replica",
    () =>
      /slave/.test(
        compose(
          d,
          "exec",
          "-T",
          "redis",
          "sh",
          "-c",
          'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli --user sentinel role',
        ).stdout,
      ),
    { everyMs: 1000, detail: () => sentinel(d, "replicas", "agentd") },
  );
  down(d);
});

/** An HTTP server on the host (loopback by default) that answers "hello from HOST" and counts connections. */
async function upstream(host = "127.0.0.1"): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const s = http.createServer((req, res) => {
    res.end(`hello from ${req.headers.host?.split(":")[0]}\n`);
  });
  servers.push(s);
  s.on("connection", () => {
    hits++;
  });
  await new Promise<void>((r) => s.listen(0, host, r));
  return { port: (s.address() as net.AddressInfo).port, hits: () => hits };
}

it("an allowlist run through the composed worker: an allowed host answers, another is refused, both recorded", {
  timeout: 300_000,
}, async () => {
  const allowed = await upstream();
  const other = await upstream();
  const direct = await upstream("0.0.0.0");
  // The example's policy, with the sandbox on an allowlist: allowed.test only, which
  // resolves to the host's loopback (network.private names it), process.run unasked.
  const policy = parse(
    readFileSync(join(ROOT, "examples", "fix-failing-test", "agentd-policy.yaml"), "utf8"),
  );
  policy.sandbox.network = "allowlist";
  policy.sandbox.image = "agentd-sandbox-test:latest";
  policy.capabilities["process.run"].approval = "never";
  policy.network = { allow: ["allowed.test"], private: ["127.0.0.1"], approval: "never" };
  writeFileSync(join(tmp, "policy.yaml"), stringify(policy));
  const command = [
    `wget -q -O - http://allowed.test:${allowed.port}/; echo "allowed-exit=$?"`,
    `wget -q -O - http://other.test:${other.port}/; echo "other-exit=$?"`,
    // Around the proxy, straight to a port of the host on the run network's gateway: the
    // firewall drops it (without it, an internal network still reaches the host).
    `gw=\${HTTP_PROXY#http://}; gw=\${gw%:*}; echo hi | nc -w 3 $gw ${direct.port}; echo "direct-exit=$?"`,
  ].join("; ");
  const transcript = {
    version: 1,
    model: "replay",
    description: "scripts/compose.test.ts: one allowed and one refused fetch",
    steps: [
      {
        text: "Fetching both hosts.",
        toolCalls: [{ tool: "process.run", input: { command } }],
        usage: { inputTokens: 10, outputTokens: 10 },
      },
      { text: "Done.", usage: { inputTokens: 10, outputTokens: 2 } },
    ],
  };
  writeFileSync(join(tmp, "transcript.json"), JSON.stringify(transcript));
  // The worker (user 10001) reads the transcript from this directory.
  spawnSync("chmod", ["-R", "a+rX", tmp]);
  // The names the test's upstreams go by, in the workers' /etc/hosts (the proxy resolves
  // names in the worker); the transcript mounted where AGENTD_REPLAY points.
  const override = join(tmp, "override.yml");
  writeFileSync(
    override,
    stringify({
      version: "3.7",
      services: {
        "worker-1": {
          extra_hosts: ["allowed.test:127.0.0.1", "other.test:127.0.0.1"],
          volumes: [`${tmp}:/egress-test:ro`],
        },
      },
    }),
  );
  const d = await up(
    "egress",
    { AGENTD_POLICY: join(tmp, "policy.yaml"), AGENTD_REPLAY: "/egress-test/transcript.json" },
    [override],
    ["redis", "server-1", "worker-1"],
  );
  // The worker checks at start that it can enforce the allowlist, and stops if not.
  const health = `http://127.0.0.1:${d.env.AGENTD_HEALTH_PORT}/readyz`;
  await until("worker-1's /readyz answers 200", () => answers200(health), {
    everyMs: 250,
    detail: () => compose(d, "logs", "--tail", "20", "worker-1").stdout,
  });
  // Not spawnSync: this process's upstreams must answer while the run goes on.
  const run = await agentctlAsync(
    d.port,
    "run",
    "--repo",
    "examples/fix-failing-test",
    "--prompt",
    "Fetch both hosts.",
    "--json",
  );
  const logs = () => compose(d, "logs", "--tail", "40").stdout;
  assert.equal(run.status, 0, `${run.stdout.slice(-3000)}\n${run.stderr}\n${logs()}`);
  const runId = /"runId":"(\w+)"/.exec(run.stdout)?.[1];
  assert.ok(runId, `${run.stdout.slice(0, 2000)}\n${run.stderr}`);
  const events = eventsOf(d.port, runId);
  const requests = events
    .map((e) => e.networkRequest)
    .filter((x) => x !== undefined)
    .map((x) => `${x.host}:${x.port} ${x.decision}`);
  const output = JSON.stringify(events.filter((e) => e.toolResult !== undefined));
  assert.ok(
    requests.includes(`allowed.test:${allowed.port} allowed`),
    `network.request of allowed.test: ${requests.join(", ")}\n${output.slice(0, 3000)}\n${logs()}`,
  );
  assert.ok(
    requests.includes(`other.test:${other.port} denied`),
    `network.request of other.test: ${requests.join(", ")}`,
  );
  assert.match(output, /hello from allowed\.test/, "the allowed host's answer reached the sandbox");
  assert.match(output, /allowed-exit=0/);
  assert.match(output, /other-exit=[1-9]/, "the refused fetch failed");
  assert.equal(allowed.hits(), 1, "the allowed host was reached once");
  assert.equal(other.hits(), 0, "nothing reached the refused host");
  assert.match(output, /direct-exit=[1-9]/, "a direct connection to the host failed");
  assert.equal(direct.hits(), 0, "nothing reached the host around the proxy");
  down(d);
});
