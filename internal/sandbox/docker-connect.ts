/**
 * The Docker engine a worker uses, from the Docker CLI's own variables: DOCKER_HOST
 * (unix:///var/run/docker.sock by default, or tcp://HOST:PORT), DOCKER_TLS_VERIFY=1 and
 * DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem) for a remote engine over TLS — the
 * sidecar model of deploy/kubernetes (a DinD daemon next to the worker). The engine is
 * checked once at start: unreachable, refusing our certificate, or presenting one our CA
 * did not sign is one clear line naming DOCKER_HOST, never a stack trace mid-run.
 * Must never: fall back to the local socket when a remote engine was asked for.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import Docker from "dockerode";
import { withDeadline } from "../deadline.ts";
import { AgentdError } from "../errors.ts";

export interface DockerEngine {
  docker: Docker;
  /** Whether the engine answers now (a ping within 2 s): the worker's readiness. */
  ready(): Promise<boolean>;
  /** Where it is, for logs: "unix:///var/run/docker.sock" or "tcp://host:port (TLS)". */
  describe: string;
}

/** Builds the client from the environment and checks the engine answers (a ping). */
export async function connectDocker(env: NodeJS.ProcessEnv): Promise<DockerEngine> {
  const host = env.DOCKER_HOST ?? "unix:///var/run/docker.sock";
  // As the Docker CLI: any non-empty DOCKER_TLS_VERIFY turns verification on (docker-modem
  // itself only reads "1").
  const tls = env.DOCKER_TLS_VERIFY !== undefined && env.DOCKER_TLS_VERIFY !== "";
  if (tls) env.DOCKER_TLS_VERIFY = "1";
  const certs = env.DOCKER_CERT_PATH;
  if (tls && host.startsWith("tcp://")) {
    if (certs === undefined || certs === "")
      throw startError(
        host,
        "DOCKER_TLS_VERIFY=1 needs DOCKER_CERT_PATH (a directory with ca.pem, cert.pem and key.pem)",
      );
    const missing = ["ca.pem", "cert.pem", "key.pem"].filter((f) => !existsSync(join(certs, f)));
    if (missing.length > 0)
      throw startError(host, `DOCKER_CERT_PATH=${certs} has no ${missing.join(", ")}`);
  }
  let docker: Docker;
  try {
    docker = new Docker(); // docker-modem reads DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
  } catch (err) {
    throw startError(host, (err as Error).message);
  }
  const describe = `${host}${tls ? " (TLS)" : ""}`;
  try {
    await withDeadline(docker.ping(), 10_000, () => {
      throw Object.assign(new Error("timed out"), { code: "ETIMEOUT" });
    });
  } catch (err) {
    throw startError(host, reasonOf(err, tls));
  }
  const ready = async (): Promise<boolean> => {
    try {
      await withDeadline(docker.ping(), 2000, () => {
        throw new Error("timed out");
      });
      return true;
    } catch {
      return false;
    }
  };
  return { docker, describe, ready };
}

function startError(host: string, why: string): AgentdError {
  return new AgentdError(
    "EUNAVAILABLE",
    `cannot use the Docker engine at ${host} (DOCKER_HOST): ${why}`,
  );
}

/** What went wrong, in words that point at the fix. */
function reasonOf(err: unknown, tls: boolean): string {
  const e = err as { code?: string; message?: string; statusCode?: number };
  const code = e.code ?? "";
  if (code === "ECONNREFUSED")
    return "connection refused (is the engine running and listening there?)";
  if (code === "ENOENT" || code === "EACCES")
    return `${code === "EACCES" ? "permission denied on" : "no"} socket (is the engine running? may this user use it?)`;
  if (code === "ETIMEDOUT" || code === "ETIMEOUT") return "no answer within 10 s";
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return `TLS failed (${code}): the engine's certificate is not for this host name or address (${e.message ?? ""})`;
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_SSL|alert|certificate/i.test(`${code} ${e.message}`))
    return `TLS failed (${code || e.message}): the engine's certificate is not signed by DOCKER_CERT_PATH/ca.pem, or it refused our client certificate`;
  if (e.statusCode === 400 && !tls)
    return "the engine answered 400: it probably speaks TLS (set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH)";
  if (code === "ECONNRESET" || /socket hang up/.test(e.message ?? ""))
    return tls
      ? "the connection was reset (the engine refused our client certificate?)"
      : "the connection was reset (does the engine expect TLS? set DOCKER_TLS_VERIFY=1)";
  return e.message ?? String(err);
}
