/**
 * The agentd image `make image` builds (scripts/build-agentd-image.sh): it runs as built —
 * `--version` of agentd and agentctl, as user 10001, without the tests or the test helpers,
 * and `agentd dev` on a read-only root file system answers /readyz and /metrics; under an
 * allowlist policy a worker starts only where it can enforce it (the engine's network
 * namespace, NET_ADMIN for the image's iptables) and says why not otherwise; the image's
 * iptables uses the backend (nf_tables or legacy) that holds the engine's chain.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { freePort } from "../internal/testing/prometheus.ts";

const ROOT = join(import.meta.dirname, "..");
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;

function tag(): string {
  try {
    return readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  } catch {
    throw new Error("the agentd image is not built: run 'make image' (make test does)");
  }
}

const docker = (...args: string[]) =>
  spawnSync("docker", args, { encoding: "utf8", timeout: 60_000 });
const name = `agentd-image-test-${process.pid}`;
after(() => void docker("rm", "-f", name));

/** `docker run --rm --network none` of the image, with another entrypoint when given. */
const inImage = (image: string, entrypoint: string | undefined, ...args: string[]) =>
  docker(
    "run",
    "--rm",
    "--network",
    "none",
    ...(entrypoint === undefined ? [] : ["--entrypoint", entrypoint]),
    image,
    ...args,
  );

it("agentd and agentctl --version, as user 10001; no tests inside; its size", (t) => {
  const image = tag();
  const v = inImage(image, undefined, "--version");
  assert.equal(v.status, 0, v.stderr);
  assert.ok(v.stdout.startsWith(`agentd ${VERSION} (node v24.`), v.stdout);
  const c = inImage(image, "agentctl", "--version");
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, new RegExp(`^agentctl ${VERSION.replaceAll(".", "\\.")}`));
  const id = inImage(image, "id");
  assert.match(id.stdout, /^uid=10001\(agentd\) gid=10001\(agentd\)/);
  const inside = inImage(
    image,
    "sh",
    "-c",
    "test ! -e /opt/agentd/internal/testing && test ! -e /opt/agentd/bench && ! ls /opt/agentd/internal/api | grep -q test && ls /opt/agentd/node_modules | grep -c . ",
  );
  assert.equal(inside.status, 0, `tests or test helpers in the image: ${inside.stderr}`);
  const dev = inImage(
    image,
    "sh",
    "-c",
    "test ! -e /opt/agentd/node_modules/@biomejs && test ! -e /opt/agentd/node_modules/typescript",
  );
  assert.equal(dev.status, 0, "dev dependencies are not in the image");
  const size = Number(
    execFileSync("docker", ["image", "inspect", "-f", "{{.Size}}", image], { encoding: "utf8" }),
  );
  t.diagnostic(`${image}: ${(size / 1024 ** 2).toFixed(0)} MiB`);
  assert.ok(size < 300 * 1024 ** 2, `the image is ${(size / 1024 ** 2).toFixed(0)} MiB`);
});

it("agentd dev on a read-only root file system answers /readyz and /metrics", async () => {
  const r = docker(
    "run",
    "-d",
    "--name",
    name,
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/home/agentd:uid=10001,gid=10001",
    "-p",
    "127.0.0.1::7070",
    tag(),
    "dev",
    "--data-dir",
    "/home/agentd/data",
    "--listen",
    "0.0.0.0:7070",
  );
  assert.equal(r.status, 0, r.stderr);
  const port = docker("port", name, "7070/tcp").stdout.trim().split(":").at(-1);
  const deadline = Date.now() + 120_000; // generous: only a server that never gets ready fails
  let ready = 0;
  while (Date.now() < deadline) {
    ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (x) => x.status,
      () => 0,
    );
    if (ready === 200) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(
    ready,
    200,
    `waited 120 s for /readyz of agentd dev in the image to answer 200:\n${docker("logs", name).stderr}`,
  );
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  assert.match(
    metrics,
    new RegExp(`^agentd_build_info\\{version="${VERSION.replaceAll(".", "\\.")}"\\} 1$`, "m"),
  );
  const stop = docker("stop", "-t", "10", name);
  assert.equal(stop.status, 0);
  const code = docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.trim();
  assert.equal(code, "0", "SIGTERM: a clean stop");
});

/**
 * The egress of allowlist runs (docs/operations.md, "Network egress") needs the worker in
 * the engine's network namespace and an iptables it may use there. The image's iptables
 * picks the engine's backend and acts for user 10001 when the container has NET_ADMIN.
 */
it("a worker under an allowlist policy starts only where it can enforce it, and says why not", async () => {
  const dir = mkdtempSync(join(tmpdir(), "agentd-image-egress-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const policy = readFileSync(join(ROOT, "policy.yaml"), "utf8").replace(
    /^ {2}network: none\b/m,
    "  network: allowlist",
  );
  assert.match(policy, /^ {2}network: allowlist/m, "policy.yaml's sandbox.network");
  writeFileSync(join(dir, "policy.yaml"), policy);
  cpSync(
    join(ROOT, "examples", "fix-failing-test", "transcript.json"),
    join(dir, "transcript.json"),
  );
  chmodSync(dir, 0o755);
  const gid = String(statSync("/var/run/docker.sock").gid);
  const worker = (port: number, ...opts: string[]) =>
    docker(
      "run",
      ...opts,
      "--read-only",
      "--tmpfs",
      "/tmp",
      "-v",
      "/var/run/docker.sock:/var/run/docker.sock",
      "--group-add",
      gid,
      "-v",
      `${dir}:/t:ro`,
      tag(),
      "dev",
      "--data-dir",
      "/tmp/data",
      "--policy",
      "/t/policy.yaml",
      "--replay",
      "/t/transcript.json",
      "--listen",
      `127.0.0.1:${port}`,
    );
  // A container of its own (the socket alone): the engine's bridges are elsewhere.
  const own = worker(7070, "--rm", "--cap-add", "NET_ADMIN");
  assert.equal(own.status, 1, own.stderr);
  assert.match(own.stderr, /sandbox\.network: allowlist, which this worker cannot enforce/);
  assert.match(own.stderr, /bridges \(.*docker0.*\) are not in this process's network namespace/);
  // The host's network without NET_ADMIN: iptables may not act.
  const port = await freePort();
  const bare = worker(port, "--rm", "--network", "host");
  assert.equal(bare.status, 1, bare.stderr);
  assert.match(bare.stderr, /cannot enforce: iptables -S INPUT: .*not permitted.*NET_ADMIN/);
  // The host's network with NET_ADMIN: it starts and answers.
  const ok = worker(
    port,
    "-d",
    "--name",
    `${name}-egress`,
    "--network",
    "host",
    "--cap-add",
    "NET_ADMIN",
  );
  after(() => void docker("rm", "-f", `${name}-egress`));
  assert.equal(ok.status, 0, ok.stderr);
  const deadline = Date.now() + 120_000; // generous: only a server that never gets ready fails
  let ready = 0;
  while (ready !== 200 && Date.now() < deadline) {
    ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (x) => x.status,
      () => 0,
    );
    if (ready !== 200) await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(
    ready,
    200,
    `waited 120 s for /readyz of the egress container to answer 200:\n${docker("logs", `${name}-egress`).stderr}`,
  );
});

it("the image's iptables uses the backend that holds the engine's DOCKER-USER chain", () => {
  // Each case in a network namespace of its own (a container's, gone with it): root makes
  // the engine's chain in one backend, user 10001 asks which backend `iptables` uses.
  const backendAfter = (setup: string, as10001 = "iptables -V") => {
    const r = docker(
      "run",
      "--rm",
      "--network",
      "none",
      "--cap-add",
      "NET_ADMIN",
      "--user",
      "0",
      "--entrypoint",
      "sh",
      tag(),
      "-c",
      `${setup} && busybox su -s /bin/sh agentd -c '${as10001}'`,
    );
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const legacy = "XTABLES_LOCKFILE=/tmp/root.lock xtables-legacy-multi iptables -N DOCKER-USER";
  const nft = "xtables-nft-multi iptables -N DOCKER-USER";
  assert.match(backendAfter(legacy), /\(legacy\)/);
  assert.match(backendAfter(nft), /\(nf_tables\)/);
  assert.match(backendAfter(`${nft} && ${legacy}`), /\(nf_tables\)/, "nf_tables first");
  assert.match(backendAfter(legacy, "AGENTD_IPTABLES_MODE=nft iptables -V"), /\(nf_tables\)/);
  assert.match(backendAfter("true"), /\(nf_tables\)/, "nothing of Docker's: nf_tables");
  const bad = docker(
    "run",
    "--rm",
    "--network",
    "none",
    "-e",
    "AGENTD_IPTABLES_MODE=both",
    "--entrypoint",
    "iptables",
    tag(),
    "-V",
  );
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /AGENTD_IPTABLES_MODE must be nft or legacy, not 'both'/);
});
