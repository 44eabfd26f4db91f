/**
 * A real Prometheus server for tests (Debian's `prometheus` package): started on a free
 * loopback port with a scrape config for the given targets (1 s interval), queried over
 * its HTTP API. Must never: outlive stop() (its data directory goes too).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestPrometheus {
  url: string;
  /** An instant query; the result vector as {labels, value}. */
  query(promql: string): Promise<{ metric: Record<string, string>; value: number }[]>;
  /** Health of every target, by its scrape URL. */
  targets(): Promise<{ scrapeUrl: string; health: string; lastError: string }[]>;
  stop(): Promise<void>;
}

/** Fails with what to install when Debian's prometheus package is missing. */
export function prometheusPath(): string {
  try {
    return execFileSync("sh", ["-c", "command -v prometheus"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "prometheus is not installed: apt-get install -y prometheus (make test does it as root)",
    );
  }
}

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** `jobs`: job name → "host:port" targets (scraped at /metrics every second). */
export async function startPrometheus(jobs: Record<string, string[]>): Promise<TestPrometheus> {
  const bin = prometheusPath();
  const dir = mkdtempSync(join(tmpdir(), "agentd-prom-"));
  const config = [
    "global:",
    "  scrape_interval: 1s",
    "  evaluation_interval: 1s",
    "scrape_configs:",
    ...Object.entries(jobs).flatMap(([job, targets]) => [
      `  - job_name: ${job}`,
      "    scrape_timeout: 900ms",
      "    static_configs:",
      `      - targets: [${targets.map((t) => JSON.stringify(t)).join(", ")}]`,
    ]),
  ].join("\n");
  writeFileSync(join(dir, "prometheus.yml"), config);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = "";
  const proc: ChildProcess = spawn(
    bin,
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  proc.stdout?.on("data", (b: Buffer) => (output += b.toString()));
  proc.stderr?.on("data", (b: Buffer) => (output += b.toString()));
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // Generous: a loaded machine never fails it, only a server that never gets ready does.
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      const r = await fetch(`${url}/-/ready`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || proc.exitCode !== null) {
      await stop();
      throw new Error(
        `waited ${proc.exitCode === null ? "120 s" : "until it exited"} for prometheus to answer ${url}/-/ready:\n${output.slice(-2000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const api = async (path: string) => {
    const r = await fetch(`${url}${path}`);
    const body = (await r.json()) as { status: string; data: unknown; error?: string };
    if (body.status !== "success") throw new Error(`prometheus ${path}: ${body.error}`);
    return body.data;
  };
  return {
    url,
    async query(promql) {
      const data = (await api(`/api/v1/query?query=${encodeURIComponent(promql)}`)) as {
        result: { metric: Record<string, string>; value: [number, string] }[];
      };
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    async targets() {
      const data = (await api("/api/v1/targets")) as {
        activeTargets: { scrapeUrl: string; health: string; lastError: string }[];
      };
      return data.activeTargets;
    },
    stop,
  };
}
