/**
 * deploy/helm/agentd on a real cluster (scripts/kubernetes/cluster.sh): `helm lint` is clean
 * and `helm template` renders every option, which the API server accepts (a server-side dry
 * run); then `helm install` with the kubernetes driver: a run completes through the server's
 * Service with its sandbox in a Pod of the sandbox namespace, a run survives its worker Pod
 * being deleted mid-call (another worker takes it over), and `helm uninstall` leaves no Pod,
 * no namespace and no Secret of the release behind.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ulid } from "ulid";
import { parseAllDocuments } from "yaml";
import { ApprovalDecision } from "../../internal/gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../../internal/gen/agentd/v1/run_service_pb.js";
import { sha256Hex } from "../../internal/testing/agentd-process.ts";
import { writeTestPolicy } from "../../internal/testing/cluster.ts";
import { sandboxImage } from "../../internal/testing/docker.ts";
import { GrpcRunClient } from "../../internal/testing/grpc-run-client.ts";
import {
  HELM,
  HOST_FROM_PODS,
  loadImages,
  requireCluster,
  type TestNamespace,
  testNamespace,
} from "../../internal/testing/kubernetes.ts";
import {
  type OpenAiStub,
  type StubRequest,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../../internal/testing/openai-stub.ts";
import { tarOf } from "../../internal/testing/tar.ts";
import { until } from "../../internal/testing/until.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const CHART = join(ROOT, "deploy", "helm", "agentd");
const sh = promisify(execFile);
const tmp = mkdtempSync(join(tmpdir(), "agentd-helm-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const helm = async (...args: string[]) =>
  (await sh(HELM, ["--kubeconfig", await requireCluster(), ...args], { maxBuffer: 64 << 20 }))
    .stdout;
const kubectl = async (...args: string[]) =>
  (await sh("kubectl", ["--kubeconfig", await requireCluster(), ...args], { maxBuffer: 64 << 20 }))
    .stdout;

describe("the chart", () => {
  it("lints clean", async () => {
    const out = await helm("lint", "--strict", CHART);
    assert.match(out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    assert.doesNotMatch(out, /\[(WARNING|ERROR)\]/);
  });

  it("renders every option, and the API server accepts what it renders", async () => {
    const variants = [
      [],
      ["--set", "sandbox.driver=docker"],
      [
        "--set",
        "redis.mode=external",
        "--set",
        "redis.external.url=rediss://agentd@redis.example:6380",
        "--set",
        "redis.external.tlsCaSecret=ca",
        "--set",
        "redis.existingSecret=pw",
      ],
      [
        "--set",
        "sandbox.runtimeClassName=gvisor",
        "--set",
        "auth.existingSecret=a",
        "--set",
        "model.existingSecret=m",
      ],
      [
        "--set",
        "ingress.enabled=true",
        "--set",
        "ingress.tlsSecret=t",
        "--set",
        "grpcRoute.enabled=true",
        "--set",
        "grpcRoute.parentRefs[0].name=gw",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
      ],
    ];
    for (const v of variants) {
      const rendered = await helm("template", "r1", CHART, "--namespace", "agentd", ...v);
      const docs = parseAllDocuments(rendered)
        .map((d) => d.toJS())
        .filter(Boolean);
      assert.ok(docs.length > 5, `${v.join(" ")}: objects rendered`);
      // Objects of CRDs this cluster does not have (Prometheus Operator, Gateway API) are
      // checked by shape only; every other one by the API server itself.
      const core = docs
        .filter((d) => !/monitoring\.coreos\.com|gateway\.networking/.test(d.apiVersion))
        // A dry run cannot make the namespaces it also creates: objects of the sandbox
        // namespace are checked in "default".
        .map((d) =>
          d.metadata.namespace === undefined
            ? d
            : { ...d, metadata: { ...d.metadata, namespace: "default" } },
        );
      const file = join(tmp, `${ulid()}.yaml`);
      writeFileSync(file, JSON.stringify({ apiVersion: "v1", kind: "List", items: core }));
      const out = await kubectl("apply", "--dry-run=server", "-n", "default", "-f", file);
      assert.equal(
        out.trim().split("\n").length,
        core.length,
        `${v.join(" ")}: every object accepted`,
      );
      if (v.includes("sandbox.driver=docker")) {
        const worker = docs.find((d) => d.kind === "Deployment" && d.metadata.name === "r1-worker");
        assert.equal(worker.spec.template.spec.initContainers[0].securityContext.privileged, true);
        assert.equal(
          docs.some((d) => d.kind === "Role"),
          false,
          "no Role without the kubernetes driver",
        );
      } else {
        const worker = docs.find((d) => d.kind === "Deployment" && d.metadata.name === "r1-worker");
        assert.equal(worker.spec.template.spec.initContainers, undefined, "no sidecar");
        const rendered = JSON.stringify(docs);
        assert.doesNotMatch(rendered, /"privileged":true/);
      }
    }
  });

  it("refuses an unknown sandbox driver, naming it", async () => {
    await assert.rejects(
      helm("template", "r1", CHART, "--set", "sandbox.driver=vm"),
      /sandbox\.driver: "vm"/,
    );
  });
});

/** One process_run chosen by the prompt's kind; once answered, the model stops. */
function model({ body }: StubRequest) {
  const messages = (body?.messages ?? []) as { role: string }[];
  const kind = /chaos-(write|sleep|approve)-/.exec(JSON.stringify(messages))?.[1];
  if (kind === undefined) return { status: 500, body: { error: { message: "stub: no script" } } };
  if (messages.some((m) => m.role === "tool")) return { chunks: textReply(["Done."]) };
  const command = {
    write: "echo written > out.txt",
    sleep: "echo added >> notes.txt && sleep 30",
    approve: "echo added >> config.yaml",
  }[kind];
  const args = JSON.stringify({ command, timeoutMs: 120_000 });
  return { chunks: toolCallsReply([{ id: "call_1", name: "process_run", arguments: args }]) };
}

describe("helm install with the kubernetes driver", () => {
  let ns: TestNamespace;
  let stub: OpenAiStub;
  let client: GrpcRunClient;
  const release = `a${ulid().toLowerCase().slice(-6)}`;
  const sandboxNs = `${release}-sandboxes`;
  const token = `tok-${ulid()}`;

  before(async () => {
    ns = await testNamespace("restricted");
    const agentdImage = readFileSync(
      join(ROOT, "deploy", "image", ".built", "agentd.tag"),
      "utf8",
    ).trim();
    await loadImages(agentdImage, "agentd-redis:latest", sandboxImage("test"));
    stub = await startOpenAiStub(model, HOST_FROM_PODS);
    const policy = readFileSync(writeTestPolicy(tmp), "utf8");
    const auth = `tokens:\n  - sha256: ${sha256Hex(token)}\n    tenant: acme\n    roles: [submit, read, approve, admin]\n`;
    await kubectl(
      "create",
      "secret",
      "generic",
      "model",
      "-n",
      ns.namespace,
      "--from-literal=OPENAI_API_KEY=test",
    );
    const [repo, tag] = agentdImage.split(":") as [string, string];
    writeFileSync(join(tmp, "policy.yaml"), policy);
    writeFileSync(join(tmp, "auth.yaml"), auth);
    await helm(
      "install",
      release,
      CHART,
      "-n",
      ns.namespace,
      "--wait",
      "--timeout",
      "300s",
      "--set",
      `image.repository=${repo}`,
      "--set",
      `image.tag=${tag}`,
      "--set",
      "image.pullPolicy=Never",
      "--set",
      "redis.persistence.enabled=false",
      "--set",
      `sandbox.namespace.name=${sandboxNs}`,
      "--set",
      "server.replicas=1",
      "--set",
      "worker.replicas=2",
      "--set",
      "sandbox.warm=0",
      "--set",
      "worker.terminationGracePeriodSeconds=30",
      "--set",
      "model.existingSecret=model",
      "--set",
      `model.baseURL=${stub.baseURL}`,
      "--set-file",
      `policy=${join(tmp, "policy.yaml")}`,
      "--set-file",
      `auth.file=${join(tmp, "auth.yaml")}`,
    );
    const svc = JSON.parse(
      await kubectl("get", "svc", `${release}-server`, "-n", ns.namespace, "-o", "json"),
    );
    client = new GrpcRunClient(`${svc.spec.clusterIP}:7070`, token);
  });
  after(async () => {
    client?.close();
    await stub?.close();
    await helm("uninstall", release, "-n", ns.namespace, "--wait").catch(() => undefined);
    await ns?.cleanup();
  });

  const sandboxPods = async () =>
    JSON.parse(await kubectl("get", "pods", "-n", sandboxNs, "-o", "json")).items as {
      metadata: { name: string; uid: string };
    }[];

  const terminal = (runId: string) =>
    until(
      `run ${runId} to end`,
      async () => {
        const { run } = await client.getRun(runId);
        return run && [RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED].includes(run.state)
          ? run
          : undefined;
      },
      { capMs: 240_000 },
    );

  it("a run completes, its sandbox a Pod of the sandbox namespace", {
    timeout: 300_000,
  }, async () => {
    const { run } = await client.createRun({
      prompt: `chaos-write-${ulid()}`,
      workspaceTar: await tarOf([{ name: "a.txt", data: "a\n" }]),
    });
    assert.ok(run);
    const done = await terminal(run.runId);
    assert.equal(done.state, RunState.COMPLETED, RunState[done.state]);
    assert.ok(stub.requests.length >= 2, "the model was asked by a worker Pod");
  });

  it("a run survives its worker Pod being deleted mid-call", { timeout: 300_000 }, async () => {
    const { run } = await client.createRun({
      prompt: `chaos-sleep-${ulid()}`,
      workspaceTar: await tarOf([{ name: "notes.txt", data: "first\n" }]),
    });
    assert.ok(run);
    const pod = await until("the run's sandbox Pod", async () => (await sandboxPods())[0], {
      capMs: 120_000,
    });
    const events = client.streamEvents({ runId: run.runId });
    await until(
      "the call to start",
      async () => (events.events.some((e) => e.payload.case === "toolStarted") ? true : undefined),
      { capMs: 120_000 },
    );
    events.cancel();
    const workers = JSON.parse(
      await kubectl(
        "get",
        "pods",
        "-n",
        ns.namespace,
        "-l",
        "app.kubernetes.io/name=agentd-worker",
        "-o",
        "json",
      ),
    ).items;
    for (const w of workers)
      await kubectl(
        "delete",
        "pod",
        "-n",
        ns.namespace,
        w.metadata.name,
        "--grace-period=0",
        "--force",
        "--wait=false",
      );
    const done = await terminal(run.runId);
    assert.equal(done.state, RunState.COMPLETED, RunState[done.state]);
    const pods = await sandboxPods();
    assert.ok(
      pods.every((p) => p.metadata.uid !== pod.metadata.uid) || pods.length === 0,
      "the run's Pod went with the run",
    );
  });

  it("an approval survives a rollout of the workers", { timeout: 300_000 }, async () => {
    const { run } = await client.createRun({
      prompt: `chaos-approve-${ulid()}`,
      workspaceTar: await tarOf([{ name: "config.yaml", data: "a: 1\n" }]),
    });
    assert.ok(run);
    const events = client.streamEvents({ runId: run.runId });
    const asked = await until(
      "the approval request",
      async () => {
        const e = events.events.find((x) => x.payload.case === "approvalRequested");
        return e?.payload.case === "approvalRequested" ? e.payload.value : undefined;
      },
      {
        capMs: 120_000,
        detail: async () =>
          `events: ${events.events.map((e) => (e.payload.case === "policyDecision" || e.payload.case === "toolCall" ? JSON.stringify(e.payload.value) : e.type)).join(" ")}`,
      },
    );
    events.cancel();
    await kubectl("rollout", "restart", `deployment/${release}-worker`, "-n", ns.namespace);
    await kubectl(
      "rollout",
      "status",
      `deployment/${release}-worker`,
      "-n",
      ns.namespace,
      "--timeout=240s",
    );
    await client.unary(RunService.method.resolveApproval, {
      approvalId: asked.approvalId,
      decision: ApprovalDecision.APPROVE,
      reason: "after the rollout",
    });
    const done = await terminal(run.runId);
    assert.equal(done.state, RunState.COMPLETED, RunState[done.state]);
    const after = client.streamEvents({ runId: run.runId });
    const result = await until("the call's result", async () => {
      const e = after.events.find((x) => x.payload.case === "toolResult");
      return e?.payload.case === "toolResult" ? e.payload.value : undefined;
    });
    after.cancel();
    assert.equal(result.ok, true, "the approved call ran on a worker of the new rollout");
  });

  it("helm uninstall leaves nothing of the release", { timeout: 300_000 }, async () => {
    await helm("uninstall", release, "-n", ns.namespace, "--wait", "--timeout", "120s");
    await until(
      "the sandbox namespace to go",
      async () =>
        (await kubectl("get", "ns", sandboxNs, "--ignore-not-found", "-o", "name")).trim() === ""
          ? true
          : undefined,
      { capMs: 180_000 },
    );
    // A Deployment's Pods go after it (the garbage collector, then their grace period):
    // everything of the release must be gone within the cap, nothing may stay.
    const leftover = () =>
      kubectl(
        "get",
        "all,secrets,configmaps,networkpolicies,pdb,serviceaccounts,roles,rolebindings",
        "-n",
        ns.namespace,
        "-l",
        `app.kubernetes.io/instance=${release}`,
        "-o",
        "name",
      );
    let left = "";
    await until(
      "every object of the release to go",
      async () => {
        left = (await leftover()).trim();
        return left === "";
      },
      { capMs: 180_000, detail: () => left },
    );
    assert.equal(left.trim(), "");
    const pods = JSON.parse(await kubectl("get", "pods", "-n", ns.namespace, "-o", "json")).items;
    assert.deepEqual(
      pods
        .filter((p: { metadata: { deletionTimestamp?: string } }) => !p.metadata.deletionTimestamp)
        .map((p: { metadata: { name: string } }) => p.metadata.name),
      [],
    );
  });
});
