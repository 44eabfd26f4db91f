/**
 * Runs the real `bin/agentd` as a child process for integration tests: spawns it with the
 * given flags (and `--listen 127.0.0.1:0` unless a listen address is given), waits for its
 * `"msg":"listening"` log line and parses the port from it. A `worker` listens on nothing:
 * it is ready at its `"msg":"worker started"` line (port 0). Also writes auth files.
 *
 * AGENTD_* variables of the test's own environment are not passed on, so the server sees
 * only the flags and `env` a test gives it. Children still running when the test process
 * exits are killed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const AGENTD_BIN = fileURLToPath(new URL("../../bin/agentd", import.meta.url));

/** How a child ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface AgentdProcess {
  /** The port the server listens on (0 for a worker). */
  readonly port: number;
  /** "127.0.0.1:PORT": a grpc-js target. */
  readonly addr: string;
  /** "http://127.0.0.1:PORT". */
  readonly url: string;
  readonly pid: number;
  /** Resolves once the process has exited. */
  readonly exited: Promise<Exit>;
  /** Everything the process wrote so far (stdout and stderr lines), for failure messages. */
  output(): string;
  /**
   * Sends `signal` (default SIGTERM) and resolves with how the process exited; SIGKILLs it
   * and rejects when it has not exited within `timeoutMs` (default 60 s, generous for a
   * loaded machine).
   */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<Exit>;
  /** SIGKILL: the process dies at once, without any shutdown. */
  kill(): Promise<Exit>;
}

export interface AgentdOptions {
  /** Environment added to the (AGENTD_*-free) environment of the test. */
  env?: Record<string, string>;
  /**
   * How long to wait for the listening (worker: "worker started") line. Default 120 s: a
   * loaded machine (load average 8-15) has taken over 20 s to start `agentd dev`, and a slow
   * start is not what these tests are about.
   */
  readyTimeoutMs?: number;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function killLeftovers(): void {
  for (const child of live) child.kill("SIGKILL");
}

/**
 * Starts `bin/agentd COMMAND ...flags` ("server", "dev" or "worker") and resolves once it
 * listens (a worker: once it logged "worker started"). Rejects with the process output when
 * it exits or stays silent instead.
 */
export async function startAgentd(
  command: "server" | "dev" | "worker",
  flags: readonly string[],
  opts: AgentdOptions = {},
): Promise<AgentdProcess> {
  if (!exitHookInstalled) {
    process.once("exit", killLeftovers);
    exitHookInstalled = true;
  }
  const worker = command === "worker";
  const ready = worker ? "worker started" : "listening";
  const args = [command, ...flags];
  if (!worker && !flags.some((f) => f === "--listen" || f.startsWith("--listen=")))
    args.push("--listen", "127.0.0.1:0");
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Neither our settings nor a model's credentials leak in from the caller's environment:
    // a test that wants a model gives one (a stub) in opts.env.
    if (v !== undefined && !k.startsWith("AGENTD_") && !k.startsWith("OPENAI_")) env[k] = v;
  }
  Object.assign(env, opts.env);

  const child = spawn(AGENTD_BIN, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  const lines: string[] = [];
  const remember = (line: string): void => {
    lines.push(line);
    if (lines.length > 2000) lines.splice(0, lines.length - 2000);
  };
  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
  });
  const output = (): string => lines.join("\n");
  // Both pipes are read to the end, always: a full pipe would block the server's logger.
  createInterface({ input: child.stderr }).on("line", remember);
  const stdout = createInterface({ input: child.stdout });

  const port = await new Promise<number>((resolve, reject) => {
    const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `agentd ${args.join(" ")}: waited ${readyTimeoutMs} ms for its {"msg":"${ready}"} log line on stdout and it never came (killed it); its output so far:\n${output()}`,
        ),
      );
    }, readyTimeoutMs);
    stdout.on("line", (line) => {
      remember(line);
      let rec: { msg?: unknown; addr?: unknown };
      try {
        rec = JSON.parse(line) as typeof rec;
      } catch {
        return;
      }
      if (worker && rec.msg === ready) {
        clearTimeout(timer);
        resolve(0);
        return;
      }
      if (rec.msg !== "listening" || typeof rec.addr !== "string") return;
      const m = /^127\.0\.0\.1:(\d+)$/.exec(rec.addr);
      clearTimeout(timer);
      if (m === null) reject(new Error(`agentd listens on unexpected address ${rec.addr}`));
      else resolve(Number(m[1]));
    });
    void exited.then((e) => {
      clearTimeout(timer);
      reject(
        new Error(
          `agentd ${args.join(" ")} exited (code ${e.code}, signal ${e.signal}) before "${ready}"\n${output()}`,
        ),
      );
    });
  });

  const stop = async (signal: NodeJS.Signals = "SIGTERM", timeoutMs = 60_000): Promise<Exit> => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`agentd did not exit within ${timeoutMs} ms of ${signal}\n${output()}`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    port,
    addr: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    exited,
    output,
    stop,
    kill: () => stop("SIGKILL"),
  };
}

/** A bearer token and what it may do, for an auth file. */
export interface TestToken {
  token: string;
  tenant: string;
  roles: readonly ("submit" | "read" | "approve" | "admin")[];
}

/** sha256 hex of a token, computed here (not by the code under test). */
export function sha256Hex(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Writes `DIR/auth.yaml` listing the tokens' hashes; returns its path. */
export function writeAuthFile(dir: string, tokens: readonly TestToken[]): string {
  const path = join(dir, "auth.yaml");
  const entries = tokens.map(
    (t) =>
      `  - sha256: ${sha256Hex(t.token)}\n    tenant: ${t.tenant}\n    roles: [${t.roles.join(", ")}]\n`,
  );
  writeFileSync(path, `tokens:\n${entries.join("")}`);
  return path;
}
