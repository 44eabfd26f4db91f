#!/usr/bin/env node
/**
 * The kubernetes sandbox driver against the Docker driver, on the same machine, in one run
 * (issue #30): `node bench/kubernetes.ts` (make bench; never run by the tests). It brings
 * the test cluster up (scripts/kubernetes/cluster.sh) and copies the test image into it.
 *
 *  (a) cold start to first exec: create (no warm Pod) + exec `true`, kubernetes vs docker,
 *      samples interleaved; target p50 ratio <= 2;
 *  (b) a warm Pod handed over to its first exec: p50 <= 100 ms;
 *  (c) process.run("true") through the agent (pods/exec stream vs Docker's attach stream):
 *      p50 ratio <= 2;
 *  (d) 50 concurrent runs' sandboxes on one driver (one worker): created, one call each,
 *      removed; none lost.
 *
 * Prints one line per figure and one JSON line; a missed target is reported, not fatal.
 *
 * What (a) measures here (2 cores, containerd 1.6): the API server and scheduler take
 * ~40 ms, containerd's RunPodSandbox (pause and the CNI bridge) ~130 ms, create and start
 * of the sandbox container ~110 ms (containerd's log), and the kubelet ~300 ms more: it
 * checks a Pod's volumes (the emptyDirs /workspace and /tmp live in) every 300 ms
 * (podAttachAndMountRetryInterval). Docker's start has none of these steps. Warm Pods (b)
 * are how the driver meets a run without them.
 */
import { ulid } from "ulid";
import { createDockerSandbox } from "../internal/sandbox/docker-sandbox.ts";
import { createKubernetesSandbox } from "../internal/sandbox/kubernetes/kubernetes-sandbox.ts";
import type { PooledSandbox, SandboxHandle, SandboxShape } from "../internal/sandbox/port.ts";
import { requireDocker, sandboxImage } from "../internal/testing/docker.ts";
import { loadImages, testNamespace } from "../internal/testing/kubernetes.ts";

const COLD = 8;
const WARM = 10;
const EXECS = 200;
const CONCURRENT = 50;

const image = sandboxImage("test");
const shape: SandboxShape = {
  image,
  network: "none",
  limits: {
    memoryBytes: 64 << 20,
    cpus: 0.5,
    pids: 64,
    tmpBytes: 16 << 20,
    workspaceBytes: 32 << 20,
  },
};
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const ms = (x: number) => `${x.toFixed(1)} ms`;
const exec = (h: SandboxHandle) =>
  h.exec({ argv: ["true"], timeoutMs: 30_000, maxOutputBytes: 4096 });

async function coldStart(s: PooledSandbox): Promise<number> {
  const t0 = performance.now();
  const h = await s.create({ ...shape, runId: ulid(), tenantId: "bench" });
  const r = await exec(h);
  const took = performance.now() - t0;
  if (r.exitCode !== 0) throw new Error(`exec exited ${r.exitCode}: ${r.stderr}`);
  await h.destroy();
  return took;
}

const ns = await testNamespace("baseline");
await loadImages(image);
const docker = createDockerSandbox({
  docker: await requireDocker(),
  managedLabel: `bench-${ulid().toLowerCase()}`,
  warm: 0,
});
const kube = (warm: number) =>
  createKubernetesSandbox({
    kc: ns.kc,
    namespace: ns.namespace,
    managed: `b${ulid().toLowerCase().slice(-8)}`,
    imagePullPolicy: "Never",
    warm,
  });
const cold = kube(0);
try {
  // (a) interleaved cold starts, one of each warm-up first
  await coldStart(cold);
  await coldStart(docker);
  const k: number[] = [];
  const d: number[] = [];
  for (let i = 0; i < COLD; i++) {
    k.push(await coldStart(cold));
    d.push(await coldStart(docker));
  }
  const coldRatio = p50(k) / p50(d);
  console.log(
    `(a) cold start to first exec: kubernetes p50 ${ms(p50(k))}, docker p50 ${ms(p50(d))}: ${coldRatio.toFixed(2)}x (target <= 2x): ${coldRatio <= 2 ? "met" : "MISSED"}`,
  );

  // (b) warm hand-over
  const warm = kube(1);
  const w: number[] = [];
  for (let i = 0; i < WARM; i++) {
    await warm.prewarm(shape);
    const t0 = performance.now();
    const h = await warm.create({ ...shape, runId: ulid(), tenantId: "bench" });
    await exec(h);
    w.push(performance.now() - t0);
    await h.destroy();
  }
  await warm.close();
  console.log(
    `(b) warm Pod to first exec: p50 ${ms(p50(w))} (target <= 100 ms): ${p50(w) <= 100 ? "met" : "MISSED"}`,
  );

  // (c) process.run("true") through each agent, interleaved
  const kh = await cold.create({ ...shape, runId: ulid(), tenantId: "bench" });
  const dh = await docker.create({ ...shape, runId: ulid(), tenantId: "bench" });
  const ke: number[] = [];
  const de: number[] = [];
  for (let i = 0; i < EXECS + 10; i++) {
    for (const [h, xs] of [
      [kh, ke],
      [dh, de],
    ] as const) {
      const t0 = performance.now();
      await exec(h);
      if (i >= 10) xs.push(performance.now() - t0);
    }
  }
  await Promise.all([kh.destroy(), dh.destroy()]);
  const execRatio = p50(ke) / p50(de);
  console.log(
    `(c) process.run("true"): kubernetes p50 ${ms(p50(ke))}, docker p50 ${ms(p50(de))}: ${execRatio.toFixed(2)}x (target <= 2x): ${execRatio <= 2 ? "met" : "MISSED"}`,
  );

  // (d) 50 at once on one driver
  const t0 = performance.now();
  const results = await Promise.allSettled(
    Array.from({ length: CONCURRENT }, async () => {
      const h = await cold.create({ ...shape, runId: ulid(), tenantId: "bench" });
      try {
        const r = await h.exec({
          argv: ["sh", "-c", "echo ok"],
          timeoutMs: 60_000,
          maxOutputBytes: 4096,
        });
        if (r.stdout !== "ok\n") throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`);
      } finally {
        await h.destroy();
      }
    }),
  );
  const lost = results.filter((r) => r.status === "rejected");
  for (const r of lost.slice(0, 3)) console.log(`    lost: ${(r as PromiseRejectedResult).reason}`);
  const wall = performance.now() - t0;
  console.log(
    `(d) ${CONCURRENT} concurrent sandboxes, one call each: ${CONCURRENT - lost.length} ok, ${lost.length} lost, in ${(wall / 1000).toFixed(1)} s (target: none lost): ${lost.length === 0 ? "met" : "MISSED"}`,
  );
  console.log(
    JSON.stringify({
      bench: "kubernetes",
      coldP50Ms: p50(k),
      dockerColdP50Ms: p50(d),
      coldRatio,
      warmP50Ms: p50(w),
      execP50Ms: p50(ke),
      dockerExecP50Ms: p50(de),
      execRatio,
      concurrent: CONCURRENT,
      lost: lost.length,
      concurrentWallMs: wall,
    }),
  );
} finally {
  await cold.reap(() => false).catch(() => undefined);
  await docker.reap(() => false).catch(() => undefined);
  await ns.cleanup();
}
