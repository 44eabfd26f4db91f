/**
 * A worker on a remote Docker engine (the sidecar model): a second dockerd that listens
 * only on a TCP port with TLS and certificates the test makes. With DOCKER_HOST,
 * DOCKER_TLS_VERIFY and DOCKER_CERT_PATH the worker runs its sandboxes there (the local
 * engine never sees them) and the run completes; a certificate from another CA, no
 * certificates, or nobody listening is one clear line at start.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { AGENTD_BIN } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { sandboxImage } from "../testing/docker.ts";
import { type StubRequest, textReply, toolCallsReply } from "../testing/openai-stub.ts";
import { createRunWatch, payloads } from "../testing/run-watch.ts";
import { startTlsDockerd, type TlsDockerd } from "../testing/tls-dockerd.ts";

let engine: TlsDockerd;
let c: Cluster;

function model({ body }: StubRequest) {
  const n = ((body?.messages ?? []) as { role: string }[]).filter((m) => m.role === "tool").length;
  if (n === 0)
    return {
      chunks: toolCallsReply([
        {
          id: "call_1",
          name: "process_run",
          arguments: JSON.stringify({ command: "echo remote > r.txt; cat r.txt" }),
        },
      ]),
    };
  return { chunks: textReply(["done on the remote engine"]) };
}

before(async () => {
  engine = await startTlsDockerd();
  engine.load(sandboxImage("test"));
  c = await startCluster({ workers: 1, env: engine.env, script: model });
});

after(async () => {
  await c?.stop();
  await engine?.stop();
});

it("a run completes with its sandbox on the TLS engine; the local engine never sees it", async () => {
  const w = createRunWatch(c);
  const since = Math.floor(Date.now() / 1000) - 1;
  const s = await w.submit("remote");
  const events = await w.assertHealthy(s.runId);
  const started = payloads(events, "runStarted")[0];
  assert.ok(started?.containerId, "run.started names the container");
  const result = payloads(events, "toolResult")[0];
  assert.match(result?.outputJson ?? "", /remote/);
  const until = Math.floor(Date.now() / 1000) + 1;
  const seen = async (docker: typeof engine.docker): Promise<number> => {
    const stream = (await docker.getEvents({
      since,
      until,
      filters: { container: [started.containerId], type: ["container"] },
    })) as NodeJS.ReadableStream;
    let text = "";
    for await (const chunk of stream) text += chunk.toString();
    return text.split("\n").filter((l) => l.includes('"status":"start"')).length;
  };
  assert.ok((await seen(engine.docker)) >= 1, "started on the remote engine");
  assert.equal(await seen(c.docker), 0, "never on the local one");
  assert.match(c.workers[0]?.output() ?? "", /"engine":"tcp:\/\/127\.0\.0\.1:\d+ \(TLS\)"/);
  // The second engine leaves the host's engine alone (its default bridge stays).
  assert.equal(spawnSync("ip", ["link", "show", "docker0"]).status, 0, "docker0 is still there");
});

function startWorker(env: Record<string, string>) {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("AGENTD_") && !k.startsWith("DOCKER_")) clean[k] = v;
  return spawnSync(
    AGENTD_BIN,
    [
      "worker",
      "--event-log",
      c.redis.url,
      "--artifact-dir",
      join(c.dir, "artifacts"),
      "--policy",
      c.policyFile,
    ],
    {
      env: { ...clean, OPENAI_API_KEY: "test", OPENAI_BASE_URL: c.stub.baseURL, ...env },
      encoding: "utf8",
      timeout: 60_000,
    },
  );
}

it("a wrong certificate, missing certificates or no engine: one clear line at start, exit 1", () => {
  const cases: [Record<string, string>, RegExp][] = [
    [
      { ...engine.env, DOCKER_CERT_PATH: engine.wrongCertPath },
      /TLS failed|refused our client certificate|connection was reset/,
    ],
    [
      { ...engine.env, DOCKER_CERT_PATH: "/nonexistent/certs" },
      /DOCKER_CERT_PATH=\/nonexistent\/certs has no ca\.pem, cert\.pem, key\.pem/,
    ],
    [{ DOCKER_HOST: engine.host, DOCKER_TLS_VERIFY: "1" }, /needs DOCKER_CERT_PATH/],
    [{ DOCKER_HOST: engine.host }, /it probably speaks TLS \(set DOCKER_TLS_VERIFY=1/],
    [{ DOCKER_HOST: "tcp://127.0.0.1:1" }, /connection refused/],
  ];
  for (const [env, why] of cases) {
    const r = startWorker(env);
    assert.equal(r.status, 1, `${JSON.stringify(env)}\n${r.stderr}`);
    const host = env.DOCKER_HOST?.replaceAll(".", "\\.") ?? "";
    assert.match(
      r.stderr,
      new RegExp(`^agentd: cannot use the Docker engine at ${host} \\(DOCKER_HOST\\): `, "m"),
    );
    assert.match(r.stderr, why);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});
