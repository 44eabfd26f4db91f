/**
 * Attack (shadow mode vs the log): roll out the strictest network candidate there is —
 * `sandbox.network: none` (no network at all, the default policy's own setting) — beside
 * an enforced `sandbox.network: allowlist`. Under the candidate every connection of the
 * run would fail, yet the log gets no `policy.shadow` for any of them, so `agentctl policy
 * report` says the candidate decides every connection as the enforced policy does.
 *
 * Why it gets through: egress-shadow.ts egressShadow() hands the proxy networkOf(candidate)
 * — the candidate's `network` section only — and run-egress.ts shadowAdmit() judges the
 * connection by that section's allow list and approval mode; the candidate's
 * sandbox.network (none: no proxy, no route out) is never looked at, and its network
 * section (the default's, or whatever it still lists) admits the host.
 *
 * What must hold (docs/policy.md "Shadow mode": a candidate is evaluated "on every call …
 * and every call it would have decided differently is recorded"; Connections too: "one the
 * candidate would have allowed, asked for or refused differently is a policy.shadow with
 * tool network"): the connection gets one policy.shadow whose candidate side is deny; the
 * connection itself follows the enforced policy.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision } from "../gen/agentd/v1/events_pb.js";
import { createKernel } from "../kernel/kernel.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { allowlistPolicy, resolveTestNames } from "../testing/egress-fixtures.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let server: net.Server;
let port = 0;
let enforced: Policy;
let candidate: Policy;

const fetch = (host: string) =>
  `python3 -c 'import urllib.request as u
try: print("STATUS", u.urlopen("http://${host}:${port}/", timeout=10).read().decode())
except Exception as x: print("REFUSED", x)'`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack4-egress-none-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  server = http.createServer((req, res) => res.end(`hello ${req.headers.host}`));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as net.AddressInfo).port;
  // allowed.test resolves to 127.0.0.1: the enforced policy lets it through network.private.
  enforced = allowlistPolicy({ allow: ["allowed.test"], approval: "risk" });
  // The stricter candidate: no network at all (its network section unchanged).
  const same = allowlistPolicy({ allow: ["allowed.test"], approval: "risk" });
  candidate = { ...same, sandbox: { ...same.sandbox, network: "none" } };
});
after(async () => {
  server?.close();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a candidate with sandbox.network: none: a connection it would never make is a policy.shadow", async () => {
  const t = await testSandbox();
  try {
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(await packWorkspace([]));
    const run = await queueRun(log, {
      prompt: "fetch",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const base = { log, policy: enforced, sandbox: t.sandbox, artifacts, baseURL: stub.baseURL };
    const deps = stubDriverDeps(base, {
      kernel: createKernel({
        log,
        policy: () => enforced,
        shadow: () => ({ policy: candidate, source: "server", path: "/etc/agentd/candidate.yaml" }),
        shadowTenant: "acme",
        secretProviders: [],
        artifacts,
      }),
      egress: { resolve: resolveTestNames },
    });
    script = [callReply("n1", "process.run", { command: fetch("allowed.test") }), sayReply("done")];
    const stop = new AbortController();
    await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
    const ps = (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const requests = ps.flatMap((p) => (p.case === "networkRequest" ? [p.value] : []));
    assert.deepEqual(
      requests.map((r) => `${r.callId}:${r.host}:${r.decision}`),
      ["n1:allowed.test:allowed"],
      "the enforced policy admits the connection (network.private names 127.0.0.1)",
    );
    const shadows = ps.flatMap((p) => (p.case === "policyShadow" ? [p.value] : []));
    assert.equal(
      shadows.length,
      1,
      "the candidate (no network) would refuse the connection: one policy.shadow",
    );
    assert.equal(shadows[0]?.tool, "network");
    assert.equal(shadows[0]?.candidate?.decision, Decision.DENY);
  } finally {
    await t.cleanup();
  }
});
