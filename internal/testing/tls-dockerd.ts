/**
 * A second Docker engine for tests, reached only over TCP with TLS (the sidecar model):
 * certificates made with openssl for the test (a CA, a server certificate for 127.0.0.1,
 * a client certificate), `dockerd` on a free loopback port with --tlsverify, its own data
 * and exec roots, its own bridge interface (made here, removed by stop()), no iptables.
 * Also a second CA's client certificate, which the engine must refuse. Must never: leave
 * the daemon, its data or its bridge behind (stop()), or touch the host engine's docker0.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { makeCa, sign } from "./certs.ts";
import { freePort } from "./prometheus.ts";

export interface TlsDockerd {
  /** tcp://127.0.0.1:PORT */
  host: string;
  /** DOCKER_CERT_PATH of a client the engine trusts (ca.pem, cert.pem, key.pem). */
  certPath: string;
  /** DOCKER_CERT_PATH of a client from another CA (refused), which also distrusts the engine. */
  wrongCertPath: string;
  /** The environment a worker needs for this engine. */
  env: Record<string, string>;
  docker: Docker;
  /** `docker save IMAGE | docker load` into this engine. */
  load(image: string): void;
  stop(): Promise<void>;
}

/** A client directory as DOCKER_CERT_PATH wants it. */
function clientDir(ca: string, out: string): string {
  mkdirSync(out, { recursive: true });
  execFileSync("cp", [join(ca, "ca.pem"), join(out, "ca.pem")]);
  execFileSync("cp", [join(ca, "client-cert.pem"), join(out, "cert.pem")]);
  execFileSync("cp", [join(ca, "client-key.pem"), join(out, "key.pem")]);
  return out;
}

export async function startTlsDockerd(): Promise<TlsDockerd> {
  execFileSync("sh", ["-c", "command -v dockerd && command -v openssl"], { stdio: "ignore" });
  const dir = mkdtempSync(join(tmpdir(), "agentd-tls-dockerd-"));
  // The engine's own data on a disk path dockerd can use for its storage driver.
  const data = mkdtempSync("/var/lib/agentd-test-dockerd-");
  const ca = join(dir, "ca");
  makeCa(ca);
  sign(ca, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  sign(ca, "client", "/CN=agentd-worker", "extendedKeyUsage=clientAuth\n");
  const other = join(dir, "other-ca");
  makeCa(other);
  sign(other, "client", "/CN=intruder", "extendedKeyUsage=clientAuth\n");
  const certPath = clientDir(ca, join(dir, "client"));
  const wrongCertPath = clientDir(other, join(dir, "wrong-client"));
  const port = await freePort();
  const host = `tcp://127.0.0.1:${port}`;
  const bridge = `agt${process.pid % 100000}`;
  const net = `10.213.${process.pid % 250}.1/24`;
  execFileSync("sh", [
    "-c",
    `ip link add ${bridge} type bridge && ip addr add ${net} dev ${bridge} && ip link set ${bridge} up`,
  ]);
  let output = "";
  const proc: ChildProcess = spawn(
    "dockerd",
    [
      "--host",
      host,
      "--tlsverify",
      "--tlscacert",
      join(ca, "ca.pem"),
      "--tlscert",
      join(ca, "server-cert.pem"),
      "--tlskey",
      join(ca, "server-key.pem"),
      "--data-root",
      join(data, "data"),
      "--exec-root",
      join(dir, "exec"),
      "--pidfile",
      join(dir, "docker.pid"),
      // Its own bridge: with --bridge none, dockerd deletes the host's docker0 (the main
      // engine's default network) when it starts.
      "--bridge",
      bridge,
      "--iptables=false",
      "--ip6tables=false",
      "--ip-masq=false",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  proc.stdout?.on("data", (b: Buffer) => (output += b.toString()));
  proc.stderr?.on("data", (b: Buffer) => (output += b.toString()));
  const env = { DOCKER_HOST: host, DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certPath };
  const docker = new Docker({
    protocol: "https",
    host: "127.0.0.1",
    port,
    ca: readFileSync(join(certPath, "ca.pem")),
    cert: readFileSync(join(certPath, "cert.pem")),
    key: readFileSync(join(certPath, "key.pem")),
  });
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(t);
    }
    execFileSync("sh", [
      "-c",
      `umount -R ${join(data, "data")} 2>/dev/null || true; ip link del ${bridge} 2>/dev/null || true`,
    ]);
    rmSync(data, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  };
  // Generous: a loaded machine never fails it, only an engine that never answers does.
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await docker.ping();
      break;
    } catch {
      if (Date.now() > deadline || proc.exitCode !== null) {
        await stop();
        throw new Error(
          `waited ${proc.exitCode === null ? "120 s" : "until it exited"} for the TLS dockerd to answer a ping:\n${output.slice(-3000)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const cli = [
    "--tlsverify",
    "--tlscacert",
    join(certPath, "ca.pem"),
    "--tlscert",
    join(certPath, "cert.pem"),
    "--tlskey",
    join(certPath, "key.pem"),
    "-H",
    host,
  ];
  return {
    host,
    certPath,
    wrongCertPath,
    env,
    docker,
    load(image) {
      execFileSync("sh", ["-c", `docker save ${image} | docker ${cli.join(" ")} load`], {
        stdio: "ignore",
      });
    },
    stop,
  };
}
