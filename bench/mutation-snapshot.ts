#!/usr/bin/env node
/**
 * Mutation-point snapshot benchmark: `node bench/mutation-snapshot.ts [--rounds N]` (never
 * run by the tests). Would a workspace snapshot after every writing call be cheap enough to
 * make a lost container lose nothing? Measures, in one real container of the test image, a
 * trivial process.run-sized exec (`true`) against snapshotWorkspace (worker/
 * workspace-snapshot.ts: export, normalise, store; it is not incremental — every snapshot
 * is the whole workspace) for a small repository (200 files, ~1 MiB) and a mid-sized one
 * (5,000 files, ~40 MiB). Prints medians and the ratio snapshot / exec, then one JSON line.
 * Must never: be run by the tests.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { createRunSecrets } from "../internal/kernel/run-secrets.ts";
import { packWorkspace } from "../internal/sandbox/workspace-archive.ts";
import { testBoxSpec, testSandbox } from "../internal/testing/docker.ts";
import { snapshotWorkspace } from "../internal/worker/workspace-snapshot.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`--rounds: want a positive integer, got ${values.rounds}`);
  process.exit(2);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const dir = mkdtempSync(join(tmpdir(), "agentd-bench-snap-"));
const store = new FsArtifactStore(join(dir, "artifacts"));
const t = await testSandbox();
const out: Record<string, unknown> = {};
try {
  for (const [name, files, size] of [
    ["small", 200, 5 * 1024],
    ["mid", 5_000, 8 * 1024],
  ] as const) {
    const tar = await packWorkspace(
      Array.from({ length: files }, (_, i) => ({
        path: `d${i % 50}/f${i}.txt`,
        type: "file" as const,
        mode: 0o644,
        data: Buffer.alloc(size, 97 + (i % 26)),
      })),
    );
    const box = await t.sandbox.create({ ...testBoxSpec(), workspaceTar: tar });
    try {
      const exec: number[] = [];
      const snap: number[] = [];
      for (let i = 0; i < rounds; i++) {
        let t0 = performance.now();
        await box.exec({ argv: ["true"], timeoutMs: 10_000, maxOutputBytes: 1024 });
        exec.push(performance.now() - t0);
        // A write before each snapshot: a different archive each time (no dedup by digest).
        await box.exec({
          argv: ["sh", "-c", `echo ${i} > d0/round.txt`],
          timeoutMs: 10_000,
          maxOutputBytes: 1024,
        });
        t0 = performance.now();
        await snapshotWorkspace(store, box, createRunSecrets([]));
        snap.push(performance.now() - t0);
      }
      const r = { files, bytes: tar.byteLength, execMs: median(exec), snapshotMs: median(snap) };
      out[name] = { ...r, ratio: r.snapshotMs / Math.max(r.execMs, 0.001) };
      console.log(
        `${name}: ${files} files, ${(tar.byteLength / 1048576).toFixed(1)} MiB: exec p50 ${r.execMs.toFixed(1)} ms, snapshot p50 ${r.snapshotMs.toFixed(1)} ms (${(r.snapshotMs / r.execMs).toFixed(0)}x)`,
      );
    } finally {
      await box.destroy();
    }
  }
} finally {
  await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify({ bench: "mutation-snapshot", rounds, ...out }));
