#!/usr/bin/env node
/**
 * The agentd image against the source tree: `node bench/image.ts [--runs N]` (make bench;
 * never run by the tests; needs `make image`). In one run, alternating:
 *
 *   --version   `bin/agentd --version` (the source tree's baseline) vs
 *               `docker run --rm agentd:HASH --version` (a container's whole life)
 *   /readyz     `bin/agentd dev` vs `docker run agentd:HASH dev` (read-only root, tmpfs
 *               data): from the spawn to the first 200 of /readyz
 *
 * and the image's size. Medians of --runs (default 5).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort } from "../internal/testing/prometheus.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "bin", "agentd");

const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] as number;

function timed(cmd: string, args: string[]): number {
  const t0 = performance.now();
  execFileSync(cmd, args, { stdio: "ignore" });
  return performance.now() - t0;
}

async function untilReady(port: number, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error("not ready in 30 s");
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function readyFromSource(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "agentd-bench-image-"));
  const port = await freePort();
  const t0 = performance.now();
  const p = spawn(BIN, ["dev", "--data-dir", dir, "--listen", `127.0.0.1:${port}`], {
    stdio: "ignore",
  });
  try {
    await untilReady(port, p);
    return performance.now() - t0;
  } finally {
    p.kill("SIGTERM");
    await new Promise((r) => p.once("exit", r));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function readyFromImage(tag: string): Promise<number> {
  const port = await freePort();
  const name = `agentd-bench-image-${process.pid}`;
  const t0 = performance.now();
  const p = spawn(
    "docker",
    [
      "run",
      "--rm",
      "--name",
      name,
      "--read-only",
      "--tmpfs",
      "/tmp",
      "--tmpfs",
      "/home/agentd:uid=10001,gid=10001",
      "-p",
      `127.0.0.1:${port}:7070`,
      tag,
      "dev",
      "--data-dir",
      "/home/agentd/data",
      "--listen",
      "0.0.0.0:7070",
    ],
    { stdio: "ignore" },
  );
  try {
    await untilReady(port, p);
    return performance.now() - t0;
  } finally {
    execFileSync("docker", ["rm", "-f", name], { stdio: "ignore" });
    await new Promise((r) => (p.exitCode !== null ? r(undefined) : p.once("exit", r)));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
  const runs = Number(values.runs);
  const tag = readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  const size = Number(
    execFileSync("docker", ["image", "inspect", "-f", "{{.Size}}", tag], { encoding: "utf8" }),
  );
  const v = { src: [] as number[], img: [] as number[] };
  const r = { src: [] as number[], img: [] as number[] };
  timed(BIN, ["--version"]); // warm the page cache of both
  timed("docker", ["run", "--rm", "--network", "none", tag, "--version"]);
  for (let i = 0; i < runs; i++) {
    v.src.push(timed(BIN, ["--version"]));
    v.img.push(timed("docker", ["run", "--rm", "--network", "none", tag, "--version"]));
    r.src.push(await readyFromSource());
    r.img.push(await readyFromImage(tag));
  }
  const row = (what: string, a: number[], b: number[]) =>
    `  ${what.padEnd(22)} source ${median(a).toFixed(0).padStart(6)} ms   image ${median(b).toFixed(0).padStart(6)} ms   ${(median(b) / median(a)).toFixed(2)}x\n`;
  process.stdout.write(
    `bench/image: ${tag}, ${(size / 1024 ** 2).toFixed(0)} MiB; medians of ${runs}\n` +
      row("--version", v.src, v.img) +
      row("start → /readyz (dev)", r.src, r.img),
  );
  process.stdout.write(
    `${JSON.stringify({ bench: "image", tag, sizeBytes: size, version: v, ready: r })}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench/image: ${(err as Error).message}\n`);
  process.exit(1);
});
