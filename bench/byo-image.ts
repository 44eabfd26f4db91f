#!/usr/bin/env node
/**
 * A run's own image: `node bench/byo-image.ts [--samples N]` (never run by the tests). In
 * one image without agentd's agent label (a busybox root made here with `docker import`),
 * the same `exec(["true"])` through the agent injected read-only (agent-bundle.ts) and
 * through the `docker exec` fallback (what such an image got before), samples interleaved;
 * plus the cold create + start + ready of each. Prints a table and one JSON line; every
 * figure of the injected agent comes with its ratio to the fallback of the same run.
 * Exit 1 when a call answers wrong.
 */
import { readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import * as tar from "tar-stream";
import { ulid } from "ulid";
import { createDockerSandbox } from "../internal/sandbox/docker-sandbox.ts";
import type { SandboxHandle, SandboxSpec } from "../internal/sandbox/port.ts";
import { packWorkspace } from "../internal/sandbox/workspace-archive.ts";
import { requireDocker, sandboxImage, TEST_LIMITS } from "../internal/testing/docker.ts";

const args = process.argv.slice(2);
const at = args.indexOf("--samples");
const SAMPLES = at >= 0 ? Number(args[at + 1]) : 200;
if (!Number.isInteger(SAMPLES) || SAMPLES < 10) {
  process.stderr.write("usage: node bench/byo-image.ts [--samples N>=10]\n");
  process.exit(2);
}

const docker = await requireDocker();
const label = `bench-${ulid().toLowerCase()}`;
const repoTag = `agentd-bench-foreign:${ulid().toLowerCase()}`;

/** busybox and every applet as a link: a shell and tar, but no agent label. */
async function foreignImage(): Promise<void> {
  const bb = readFileSync("/bin/busybox");
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  pack.entry({ name: "bin", type: "directory", mode: 0o755 });
  pack.entry({ name: "bin/busybox", mode: 0o755 }, bb);
  for (const a of [
    "sh",
    "tar",
    "cat",
    "true",
    "head",
    "sleep",
    "setsid",
    "kill",
    "mkdir",
    "rm",
    "chmod",
  ])
    pack.entry({ name: `bin/${a}`, type: "symlink", linkname: "busybox" });
  pack.finalize();
  await new Promise<void>((r) => pack.on("end", () => r()));
  const [repo, tag] = repoTag.split(":") as [string, string];
  const s = (await docker.importImage(Buffer.concat(chunks) as unknown as string, {
    repo,
    tag,
    changes: ["ENV PATH=/bin"],
  })) as unknown as Readable;
  for await (const _ of s);
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

await foreignImage();
const injected = createDockerSandbox({
  docker,
  managedLabel: label,
  agentSource: () => sandboxImage("test"),
});
const fallback = createDockerSandbox({ docker, managedLabel: label, agent: false });
const spec = async (): Promise<SandboxSpec> => ({
  runId: ulid(),
  tenantId: "bench",
  image: repoTag,
  userImage: true,
  limits: TEST_LIMITS,
  network: "none",
  workspaceTar: await packWorkspace([
    { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
  ]),
});

let failed = false;
const boxes: SandboxHandle[] = [];
try {
  const starts = { injected: [] as number[], fallback: [] as number[] };
  let a: SandboxHandle | undefined;
  let b: SandboxHandle | undefined;
  for (let i = 0; i < 6; i++) {
    for (const [name, sb] of [
      ["injected", injected],
      ["fallback", fallback],
    ] as const) {
      const t0 = performance.now();
      const h = await sb.create(await spec());
      await h.exec({ argv: ["true"], timeoutMs: 10_000, maxOutputBytes: 1024 });
      if (i > 0) starts[name].push(performance.now() - t0); // the first fills the agent volume
      boxes.push(h);
      if (name === "injected") a = h;
      else b = h;
    }
  }
  const execs = { injected: [] as number[], fallback: [] as number[] };
  for (let i = 0; i < SAMPLES + 10; i++) {
    for (const [name, h] of [
      ["injected", a],
      ["fallback", b],
    ] as const) {
      const t0 = performance.now();
      const r = await (h as SandboxHandle).exec({
        argv: ["cat", "a.txt"],
        timeoutMs: 10_000,
        maxOutputBytes: 1024,
      });
      const ms = performance.now() - t0;
      if (r.exitCode !== 0 || r.stdout !== "a\n") failed = true;
      if (i >= 10) execs[name].push(ms);
    }
  }
  const row = (what: string, ours: number[], raw: number[]) => ({
    what,
    injectedP50: +pct(ours, 50).toFixed(2),
    fallbackP50: +pct(raw, 50).toFixed(2),
    ratioP50: +(pct(ours, 50) / pct(raw, 50)).toFixed(3),
    injectedP99: +pct(ours, 99).toFixed(2),
    fallbackP99: +pct(raw, 99).toFixed(2),
  });
  const rows = [
    row("create+start+first exec (ms)", starts.injected, starts.fallback),
    row(`exec cat (ms, ${SAMPLES} samples)`, execs.injected, execs.fallback),
  ];
  console.table(rows);
  console.log(JSON.stringify({ bench: "byo-image", samples: SAMPLES, rows, failed }));
} finally {
  await Promise.allSettled(boxes.map((h) => h.destroy()));
  await injected.reap(() => false);
  await docker
    .getImage(repoTag)
    .remove({ force: true })
    .catch(() => undefined);
}
process.exit(failed ? 1 : 0);
