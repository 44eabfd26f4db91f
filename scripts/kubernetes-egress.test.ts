/**
 * The Kubernetes worker pod's egress model, without a cluster (there is none here; nothing
 * is applied to an API server): a "pod" is a container whose network namespace a second
 * dockerd (the dind sidecar's part, with its own iptables rules) and the agentd image's
 * worker share, as a pod's containers do. The worker container gets exactly the security
 * settings the rendered manifest gives it (user, capabilities dropped and added,
 * no-new-privileges from allowPrivilegeEscalation, read-only root), so a manifest that
 * loses one of them fails here. An allowlist run then fetches an allowed host through the
 * run's proxy, is refused another, and cannot reach the pod's own ports around the proxy.
 *
 * Not the same as a cluster: the engine is this machine's dockerd (Debian's, nf_tables
 * iptables) and not docker:27-dind, it is reached over a unix socket instead of TLS, and
 * the kubelet, seccomp's RuntimeDefault and the CNI are not involved. docs/kubernetes.md
 * says so.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import http from "node:http";
import type net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { parseAllDocuments, parse as parseYaml, stringify } from "yaml";
import { until } from "../internal/testing/until.ts";

const ROOT = join(import.meta.dirname, "..");
const AGENTCTL = join(ROOT, "bin", "agentctl");
const tag = `${process.pid}`;
const pod = `agentd-k8s-pod-${tag}`;
const worker = `agentd-k8s-worker-${tag}`;
const dir = mkdtempSync(join(tmpdir(), "agentd-k8s-egress-"));
// The inner engine's data on a disk path its storage driver can use (as tls-dockerd.ts).
const data = mkdtempSync("/var/lib/agentd-test-pod-dockerd-");
const servers: net.Server[] = [];
let dockerd: ChildProcess | undefined;
let dockerdOutput = "";

// biome-ignore lint/suspicious/noExplicitAny: manifests as parsed YAML
type Obj = any;

const docker = (...args: string[]) =>
  spawnSync("docker", args, { encoding: "utf8", timeout: 120_000 });

after(async () => {
  docker("rm", "-f", worker);
  if (dockerd !== undefined && dockerd.exitCode === null) {
    const exited = new Promise((r) => dockerd?.once("exit", r));
    dockerd.kill("SIGTERM");
    const t = setTimeout(() => dockerd?.kill("SIGKILL"), 20_000);
    await exited;
    clearTimeout(t);
  }
  docker("rm", "-f", pod);
  spawnSync("sh", ["-c", `umount -R ${join(data, "data")} 2>/dev/null || true`]);
  for (const s of servers) s.close();
  rmSync(data, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

/** The worker container of the rendered dev overlay. */
function workerContainer(): Obj {
  const out = execFileSync(
    "kubectl",
    ["kustomize", join(ROOT, "deploy", "kubernetes", "overlays", "dev")],
    {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  const d = parseAllDocuments(out)
    .map((x) => x.toJS() as Obj)
    .find((o) => o.kind === "Deployment" && o.metadata.name === "agentd-worker");
  return (d.spec.template.spec.containers as Obj[]).find((c) => c.name === "worker");
}

/** `docker run` flags for what the manifest's securityContext says. */
function securityFlags(sc: Obj): string[] {
  const flags = ["--user", `${sc.runAsUser}:${sc.runAsGroup}`];
  for (const c of sc.capabilities?.drop ?? []) flags.push("--cap-drop", c);
  for (const c of sc.capabilities?.add ?? []) flags.push("--cap-add", c);
  if (sc.allowPrivilegeEscalation === false) flags.push("--security-opt", "no-new-privileges");
  if (sc.privileged === true) flags.push("--privileged");
  if (sc.readOnlyRootFilesystem === true) flags.push("--read-only");
  return flags;
}

/** An HTTP server on `host` that answers "hello from HOST" and counts connections. */
async function upstream(host: string): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const s = http.createServer((req, res) => res.end(`hello from ${req.headers.host}\n`));
  s.on("connection", () => {
    hits++;
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, host, r));
  return { port: (s.address() as { port: number }).port, hits: () => hits };
}

it("an allowlist run in the worker pod's shape: the engine's namespace shared, the manifest's capabilities", {
  timeout: 300_000,
}, async () => {
  const container = workerContainer();
  const image = readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  const sandbox = readFileSync(join(ROOT, "sandbox-images", ".built", "test.tag"), "utf8").trim();
  // The host as the pod sees it: docker0's address, the pod's default gateway.
  const hostIp =
    /inet (\d+\.\d+\.\d+\.\d+)\//.exec(
      execFileSync("ip", ["-4", "-o", "addr", "show", "docker0"], { encoding: "utf8" }),
    )?.[1] ?? "";
  assert.match(hostIp, /^\d+\.\d+\.\d+\.\d+$/, "docker0's address");
  const allowed = await upstream(hostIp);
  const other = await upstream(hostIp);

  // The pod: a network namespace of its own, the API port published for this test.
  const p = docker(
    "run",
    "-d",
    "--name",
    pod,
    "-p",
    "127.0.0.1::7070",
    "--add-host",
    `allowed.test:${hostIp}`,
    "--add-host",
    `other.test:${hostIp}`,
    "--entrypoint",
    "sleep",
    sandbox,
    "3600",
  );
  assert.equal(p.status, 0, p.stderr);
  const pid = docker("inspect", "-f", "{{.State.Pid}}", pod).stdout.trim();

  // The dind part: an engine in the pod's namespace, with its own bridges and iptables rules.
  const run = join(dir, "run");
  mkdirSync(run);
  chmodSync(run, 0o755);
  const gid = String(statSync("/var/run/docker.sock").gid);
  const sock = join(run, "docker.sock");
  dockerd = spawn(
    "nsenter",
    [
      `--net=/proc/${pid}/ns/net`,
      "dockerd",
      "--host",
      `unix://${sock}`,
      "--group",
      gid,
      "--data-root",
      join(data, "data"),
      "--exec-root",
      join(dir, "exec"),
      "--pidfile",
      join(dir, "docker.pid"),
      "--bip",
      "10.214.0.1/24",
      "--default-address-pool",
      "base=10.215.0.0/16,size=24",
      // Beside the host engine's containers in the machine's containerd, never among them.
      "--containerd-namespace",
      `agentdpod${tag}`,
      "--containerd-plugins-namespace",
      `agentdpod${tag}-plugins`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  dockerd.stdout?.on("data", (b: Buffer) => (dockerdOutput += b.toString()));
  dockerd.stderr?.on("data", (b: Buffer) => (dockerdOutput += b.toString()));
  await until(
    "the pod's engine answers",
    async () => spawnSync("docker", ["-H", `unix://${sock}`, "version"]).status === 0,
    { everyMs: 250, detail: () => dockerdOutput.slice(-3000) },
  );
  execFileSync("sh", ["-c", `docker save ${sandbox} | docker -H unix://${sock} load`], {
    stdio: "ignore",
  });

  // The policy: the repository's, on an allowlist of allowed.test (the host's docker0
  // address, named in network.private), process.run unasked, the test image.
  const policy = parseYaml(readFileSync(join(ROOT, "policy.yaml"), "utf8"));
  policy.sandbox.network = "allowlist";
  policy.sandbox.image = sandbox;
  policy.capabilities["process.run"].approval = "never";
  policy.network = { allow: ["allowed.test"], private: [`${hostIp}/32`], approval: "never" };
  const t = join(dir, "t");
  mkdirSync(t);
  writeFileSync(join(t, "policy.yaml"), stringify(policy));
  const command = [
    `wget -q -O - http://allowed.test:${allowed.port}/; echo "allowed-exit=$?"`,
    `wget -q -O - http://other.test:${other.port}/; echo "other-exit=$?"`,
    // Around the proxy, to the worker's own port in the pod (agentd's API on 0.0.0.0:7070,
    // as a worker's health port is) on the run network's gateway: the firewall drops it.
    `gw=\${HTTP_PROXY#http://}; gw=\${gw%:*}; echo hi | nc -w 3 $gw 7070 >/tmp/d.out; echo "direct-exit=$?"; echo "direct-said=$(head -c 12 /tmp/d.out)"`,
  ].join("; ");
  writeFileSync(
    join(t, "transcript.json"),
    JSON.stringify({
      version: 1,
      model: "replay",
      steps: [
        {
          text: "Fetching.",
          toolCalls: [{ tool: "process.run", input: { command } }],
          usage: { inputTokens: 1, outputTokens: 1 },
        },
        { text: "Done.", usage: { inputTokens: 1, outputTokens: 1 } },
      ],
    }),
  );
  chmodSync(t, 0o755);
  chmodSync(dir, 0o755);

  // The worker: the pod's namespace, the manifest's security settings, `agentd dev` (its
  // own server and file event log: no Redis needed to show the egress).
  const sc = container.securityContext;
  const w = docker(
    "run",
    "-d",
    "--name",
    worker,
    "--network",
    `container:${pod}`,
    ...securityFlags(sc),
    "--group-add",
    gid,
    "--tmpfs",
    "/tmp",
    "-v",
    `${run}:/run/pod`,
    "-v",
    `${t}:/t:ro`,
    "-e",
    "DOCKER_HOST=unix:///run/pod/docker.sock",
    image,
    "dev",
    "--data-dir",
    "/tmp/data",
    "--policy",
    "/t/policy.yaml",
    "--replay",
    "/t/transcript.json",
    "--listen",
    "0.0.0.0:7070",
  );
  assert.equal(w.status, 0, w.stderr);
  const port = docker("port", pod, "7070/tcp").stdout.trim().split(":").at(-1);
  const logs = () => `${docker("logs", worker).stderr.slice(-3000)}`;
  await until(
    "the worker answers /readyz (it refuses to start when it cannot enforce the allowlist)",
    async () => {
      if (docker("inspect", "-f", "{{.State.Running}}", worker).stdout.trim() !== "true")
        assert.fail(`the worker stopped:\n${logs()}`);
      return (
        (await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (x) => x.status,
          () => 0,
        )) === 200
      );
    },
    { everyMs: 250, detail: logs },
  );

  // The run, without blocking this process (its upstreams must answer meanwhile).
  const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const args = ["run", "--repo", "examples/fix-failing-test", "--prompt", "Fetch.", "--json"];
      const c = spawn(AGENTCTL, args, {
        cwd: ROOT,
        env: { ...process.env, AGENTD_ADDR: `http://127.0.0.1:${port}` },
        timeout: 180_000,
      });
      let stdout = "";
      let stderr = "";
      c.stdout.on("data", (b: Buffer) => {
        stdout += b.toString();
      });
      c.stderr.on("data", (b: Buffer) => {
        stderr += b.toString();
      });
      c.on("close", (status) => resolve({ status, stdout, stderr }));
    },
  );
  assert.equal(result.status, 0, `${result.stdout.slice(-3000)}\n${result.stderr}\n${logs()}`);
  const events = result.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Obj);
  const requests = events
    .map((e) => e.networkRequest)
    .filter((x) => x !== undefined)
    .map((x) => `${x.host}:${x.port} ${x.decision}`);
  const output = JSON.stringify(events.filter((e) => e.toolResult !== undefined));
  assert.ok(
    requests.includes(`allowed.test:${allowed.port} allowed`),
    `${requests.join(", ")}\n${output.slice(0, 3000)}\n${logs()}`,
  );
  assert.ok(requests.includes(`other.test:${other.port} denied`), requests.join(", "));
  assert.match(output, /hello from allowed\.test/);
  assert.match(output, /allowed-exit=0/);
  assert.match(output, /other-exit=[1-9]/);
  assert.match(output, /direct-exit=[1-9]/, "a direct connection to the pod's port failed");
  assert.doesNotMatch(output, /direct-said=HTTP/, "agentd's port in the pod did not answer");
  assert.equal(other.hits(), 0, "nothing reached the refused host");
});
