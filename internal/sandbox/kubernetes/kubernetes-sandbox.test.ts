/**
 * The kubernetes driver on a real cluster (scripts/kubernetes/cluster.sh): a run's Pod is
 * made hardened as pod-manifest.ts says (checked from inside the Pod, not only in the
 * spec), runs calls as uid 1000 through an agent over pods/exec, takes the workspace in and
 * gives it out, is found again by another handle (a worker's takeover), and a Pod that is
 * deleted under it is a lost sandbox.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ulid } from "ulid";
import { sandboxImage, TEST_LIMITS } from "../../testing/docker.ts";
import {
  loadImages,
  requireCluster,
  type TestNamespace,
  testNamespace,
} from "../../testing/kubernetes.ts";
import { until } from "../../testing/until.ts";
import { collect } from "../collect.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "../port.ts";
import { packWorkspace, readWorkspaceArchive } from "../workspace-archive.ts";
import { createKubernetesSandbox } from "./kubernetes-sandbox.ts";
import { podName } from "./pod-manifest.ts";
import { waitRunning } from "./pod-wait.ts";

const BB = "/usr/local/libexec/agentd/busybox";

/** A Pod of the same namespace that is not a sandbox: a web server on 8080 and a shell. */
async function controlPod(): Promise<{ ip: string; exec(cmd: string): Promise<string> }> {
  await ns.core.createNamespacedPod({
    namespace: ns.namespace,
    body: {
      metadata: { name: "control" },
      spec: {
        automountServiceAccountToken: false,
        containers: [
          {
            name: "c",
            image,
            imagePullPolicy: "Never",
            command: [BB, "httpd", "-f", "-p", "8080", "-h", "/"],
          },
        ],
      },
    },
  });
  const pod = await waitRunning(ns.kc, ns.namespace, "control", "c", 120_000);
  const kubeconfig = await requireCluster();
  return {
    ip: pod.status?.podIP ?? "",
    exec: async (cmd) =>
      (
        await promisify(execFile)("kubectl", [
          "--kubeconfig",
          kubeconfig,
          "exec",
          "-n",
          ns.namespace,
          "control",
          "--",
          "bash",
          "-c",
          cmd,
        ])
      ).stdout,
  };
}

let ns: TestNamespace;
let sandbox: Sandbox;
let box: SandboxHandle;
let runId: string;
const image = sandboxImage("base");
const managed = `t${ulid().toLowerCase().slice(-8)}`;

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 20_000, maxOutputBytes: 64 * 1024, ...extra });

before(async () => {
  ns = await testNamespace("baseline");
  await loadImages(image);
  sandbox = createKubernetesSandbox({
    kc: ns.kc,
    namespace: ns.namespace,
    managed,
    imagePullPolicy: "Never",
  });
  runId = ulid();
  box = await sandbox.create({
    runId,
    tenantId: "acme",
    image,
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hi\n") },
    ]),
  });
});
after(async () => {
  await sandbox?.reap(() => false).catch(() => undefined);
  await ns?.cleanup();
});

describe("kubernetes driver", () => {
  it("runs calls as uid 1000 with no capabilities, no token, a read-only root, in the workspace it was given", async () => {
    const r = await run(
      box,
      "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; cat hello.txt; stat -c '%u %a' /workspace /tmp; ls /var/run/secrets/kubernetes.io 2>&1; touch /etc/x 2>&1; true",
    );
    assert.equal(r.exitCode, 0, r.stderr);
    const lines = r.stdout.split("\n");
    assert.equal(lines[0], "1000");
    assert.match(r.stdout, /CapEff:\s+0000000000000000/);
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /Seccomp:\s+2/);
    assert.match(r.stdout, /\nhi\n/);
    assert.match(
      r.stdout,
      /\n1000 755\n0 1777\n/,
      "the workspace is the sandbox user's, /tmp sticky",
    );
    assert.match(r.stdout, /No such file or directory/, "no service-account token");
    assert.match(r.stdout, /Read-only file system/);
  });

  it("streams the workspace out and diffs it against the one it started from", async () => {
    const w = await run(box, "printf 'new\\n' > added.txt && printf 'ho\\n' > hello.txt");
    assert.equal(w.exitCode, 0, w.stderr);
    const entries = await readWorkspaceArchive(await collect(box.exportWorkspace()));
    const byPath = new Map(entries.map((e) => [e.path, e]));
    assert.equal(byPath.get("added.txt")?.data?.toString(), "new\n");
    const d = await box.diff();
    assert.match(d.patch, /\+ho/);
    assert.match(d.patch, /added\.txt/);
  });

  it("keeps calls apart: a timeout kills the call, stdin reaches it, output is capped", async () => {
    const t = await run(box, "sleep 30", { timeoutMs: 500 });
    assert.equal(t.timedOut, true);
    const s = await box.exec({
      argv: ["cat"],
      timeoutMs: 10_000,
      maxOutputBytes: 1024,
      stdin: Buffer.from("through stdin"),
    });
    assert.equal(s.stdout, "through stdin");
    const c = await run(box, "yes | head -c 100000", { maxOutputBytes: 1000 });
    assert.equal(c.truncated, true);
  });

  it("is found again by another worker's handle, which works through an agent of its own", async () => {
    const other = createKubernetesSandbox({ kc: ns.kc, namespace: ns.namespace, managed });
    const found = await other.find(runId);
    assert.ok(found, "the run's Pod is found");
    const r = await run(found, "cat added.txt");
    assert.equal(r.stdout, "new\n");
    found.detach?.();
    assert.equal(await other.find(ulid()), undefined, "another run has no Pod");
    const stranger = createKubernetesSandbox({
      kc: ns.kc,
      namespace: ns.namespace,
      managed: "other",
    });
    assert.equal(await stranger.find(runId), undefined, "another deployment's key finds nothing");
  });

  it("a Pod deleted under the handle is a lost sandbox, and find() says there is none", async () => {
    const id = ulid();
    const h = await sandbox.create({
      runId: id,
      tenantId: "acme",
      image,
      limits: TEST_LIMITS,
      network: "none",
    });
    assert.equal(await h.lost?.(), false);
    await ns.core.deleteNamespacedPod({
      namespace: ns.namespace,
      name: podName(managed, id),
      gracePeriodSeconds: 0,
    });
    await assert.rejects(run(h, "sleep 60"), /lost|gone|closed/);
    assert.equal(await h.lost?.(), true);
    assert.equal(await sandbox.find(id), undefined);
  });

  it("reaches nothing on the cluster network, which a Pod beside it does reach", async () => {
    const node = await ns.core.readNode({ name: "agentd-node" });
    const nodeIp = node.status?.addresses?.find((a) => a.type === "InternalIP")?.address;
    assert.ok(nodeIp);
    const control = await controlPod();
    const targets = [
      ["the API server's Service", "10.96.0.1", 443],
      ["the API server on the node", nodeIp, 6443],
      ["the kubelet", nodeIp, 10250],
      ["cluster DNS", "10.96.0.10", 53],
      ["a Pod beside it", control.ip, 8080],
    ] as const;
    for (const [what, ip, port] of targets) {
      const probe = `${BB} timeout 3 bash -c 'exec 3<>/dev/tcp/${ip}/${port}' && echo open || echo closed`;
      const fromSandbox = await run(box, probe);
      assert.equal(fromSandbox.stdout.trim(), "closed", `the sandbox reached ${what}`);
      const fromControl = await control.exec(probe);
      assert.equal(fromControl.trim(), "open", `a Pod without the sandbox label reaches ${what}`);
    }
  });

  it("hands a warm Pod to a run, which is then found by its label; a dead keeper's warm Pods are reaped", async () => {
    const warm = createKubernetesSandbox({
      kc: ns.kc,
      namespace: ns.namespace,
      managed,
      imagePullPolicy: "Never",
      warm: 1,
      poolOwner: "host:1",
    });
    const shape = { image, limits: TEST_LIMITS, network: "none" as const };
    await warm.prewarm(shape);
    const id = ulid();
    const h = await warm.create({
      ...shape,
      runId: id,
      tenantId: "acme",
      workspaceTar: await packWorkspace([
        { path: "w.txt", type: "file", mode: 0o644, data: Buffer.from("warm\n") },
      ]),
    });
    assert.match(h.id, new RegExp(`/agentd-${managed}-pool-`), "the run got the warm Pod");
    const other = createKubernetesSandbox({ kc: ns.kc, namespace: ns.namespace, managed });
    const found = await other.find(id);
    assert.ok(found, "found by the run's label after the claim");
    assert.equal((await run(found, "cat w.txt")).stdout, "warm\n");
    found.detach?.();
    // The pool refilled behind the take: that Pod is the keeper's, left alone while it lives.
    const pods = async () =>
      (
        await ns.core.listNamespacedPod({
          namespace: ns.namespace,
          labelSelector: `agentd.dev/managed=${managed},agentd.dev/pool`,
        })
      ).items.filter((p) => p.metadata?.deletionTimestamp === undefined);
    await until("the refill", async () => ((await pods()).length === 1 ? true : undefined));
    await other.reap(() => true, { poolOwnerDead: async () => false });
    assert.equal((await pods()).length, 1, "a live keeper's warm Pod stays");
    await other.reap(() => true, { poolOwnerDead: async (owner) => owner === "host:1" });
    assert.equal((await pods()).length, 0, "a dead keeper's warm Pod goes");
    await h.destroy();
    await warm.close();
  });

  it("destroy removes the Pod", async () => {
    await box.destroy();
    assert.equal(await box.lost?.(), true);
    assert.equal(await sandbox.find(runId), undefined);
  });
});
