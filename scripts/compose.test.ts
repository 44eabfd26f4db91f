/**
 * deploy/compose/docker-compose.yml with Debian's docker-compose, end to end: up (Redis
 * with AOF, two servers, two workers on the host's engine, from the images `make image
 * images` built), `agentctl run` on the example repository until its patch waits for a
 * person, the worker holding the run killed, the approval given, the run completed by the
 * other worker; `down -v` leaves no container, volume or network behind.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, it } from "node:test";
import { LABEL_RUN } from "../internal/sandbox/docker-sandbox.ts";
import { freePort } from "../internal/testing/prometheus.ts";

const ROOT = join(import.meta.dirname, "..");
const COMPOSE = join(ROOT, "deploy", "compose", "docker-compose.yml");
const AGENTCTL = join(ROOT, "bin", "agentctl");
const TOKEN = "agentd-compose-demo-token-change-me"; // deploy/compose/auth.example.yaml's
const PROMPT =
  "The test suite of this repository fails. Find the bug, fix it with a minimal patch, and make sure all tests pass.";
const project = `agentdtest${process.pid}`;
let env: NodeJS.ProcessEnv = {};

function compose(...args: string[]) {
  return spawnSync("docker-compose", ["-f", COMPOSE, "-p", project, ...args], {
    env,
    encoding: "utf8",
    timeout: 180_000,
  });
}

function agentctl(port: number, ...args: string[]) {
  return spawnSync(AGENTCTL, args, {
    env: { ...process.env, AGENTD_ADDR: `http://127.0.0.1:${port}`, AGENTD_TOKEN: TOKEN },
    encoding: "utf8",
    timeout: 120_000,
    cwd: ROOT,
  });
}

const labelled = (kind: "ps" | "volume" | "network") => {
  const args =
    kind === "ps"
      ? ["ps", "-aq", "--filter", `label=com.docker.compose.project=${project}`]
      : [kind, "ls", "-q", "--filter", `label=com.docker.compose.project=${project}`];
  return spawnSync("docker", args, { encoding: "utf8" }).stdout.trim();
};

after(() => {
  if (Object.keys(env).length > 0) compose("down", "-v", "--remove-orphans");
});

it("up; a run through it survives its worker killed; down -v leaves nothing", {
  timeout: 400_000,
}, async () => {
  const image = readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  const port = await freePort();
  env = {
    ...process.env,
    AGENTD_IMAGE: image,
    AGENTD_REDIS_IMAGE: "agentd-redis:latest",
    AGENTD_POLICY: join(ROOT, "examples", "fix-failing-test", "agentd-policy.yaml"),
    AGENTD_PORT: String(port),
    AGENTD_PORT_2: String(await freePort()),
    AGENTD_LEASE_TTL_MS: "3000",
    DOCKER_GID: String(statSync("/var/run/docker.sock").gid),
    OPENAI_API_KEY: "",
    OPENAI_BASE_URL: "",
  };
  const up = compose("up", "-d");
  assert.equal(up.status, 0, up.stderr);
  const deadline = Date.now() + 60_000;
  while (
    (await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    assert.ok(
      Date.now() < deadline,
      `the server is not ready:\n${compose("logs", "--tail", "20").stdout}`,
    );
    await new Promise((r) => setTimeout(r, 250));
  }
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
    `${run.stdout}\n${run.stderr}\n${compose("logs", "--tail", "30").stdout}`,
  );
  const approval = /agentctl approve (apr_(\w+)_\w+)/.exec(run.stderr);
  assert.ok(approval, run.stderr);
  const runId = approval[2] as string;
  // Kill the worker that holds the run (its id is the container's hostname).
  const started = agentctl(port, "events", runId, "--json");
  const holder = /"workerId":"([0-9a-f]{12}):\d+"/.exec(started.stdout)?.[1];
  assert.ok(holder, started.stdout.slice(0, 2000));
  const kill = spawnSync("docker", ["kill", holder], { encoding: "utf8" });
  assert.equal(kill.status, 0, kill.stderr);
  const ok = agentctl(port, "approve", approval[1] as string, "--reason", "compose test");
  assert.equal(ok.status, 0, ok.stderr);
  let state = "";
  const until = Date.now() + 120_000;
  while (Date.now() < until) {
    state = /"state":\s*"(\w+)"/.exec(agentctl(port, "get", runId, "--json").stdout)?.[1] ?? "";
    if (/completed|failed|cancelled/i.test(state)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const events = agentctl(port, "events", runId, "--json").stdout;
  assert.match(
    state,
    /completed/i,
    `${state}\n${events.slice(-3000)}\n${compose("logs", "--tail", "30").stdout}`,
  );
  assert.match(events, /"name":"patch"/, "the patch artifact");
  const workers = new Set(
    [...events.matchAll(/"workerId":"([0-9a-f]{12}):\d+"/g)].map((m) => m[1]),
  );
  assert.ok(workers.size >= 2, `driven by two workers: ${[...workers].join(", ")}`);
  // Down: nothing of the project is left.
  const down = compose("down", "-v");
  assert.equal(down.status, 0, down.stderr);
  assert.equal(labelled("ps"), "", "no container");
  assert.equal(labelled("volume"), "", "no volume");
  assert.equal(labelled("network"), "", "no network");
  const sandboxes = spawnSync("docker", ["ps", "-aq", "--filter", `label=${LABEL_RUN}=${runId}`], {
    encoding: "utf8",
  });
  assert.equal(sandboxes.stdout.trim(), "", "no sandbox of the run");
  env = {};
});
