/**
 * Shadow mode reaches the egress proxy (egress-shadow.ts): a run with sandbox.network:
 * allowlist whose candidate policy allows one more host and refuses what the enforced one
 * asks a person for. Real parts: the base image, the run's proxy, a local upstream, the
 * embedded log. Each connection the candidate would have admitted differently is one
 * policy.shadow (tool "network") beside its network.request; the same outcome writes none;
 * what the connections actually did follows the enforced policy only.
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
  dir = mkdtempSync(join(tmpdir(), "agentd-egress-shadow-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  server = http.createServer((req, res) => res.end(`hello ${req.headers.host}`));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as net.AddressInfo).port;
  enforced = allowlistPolicy({ allow: ["allowed.test"], approval: "risk" });
  candidate = allowlistPolicy({ allow: ["allowed.test", "more.test"], approval: "never" });
});
after(async () => {
  server?.close();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a candidate's network section is judged beside the enforced one, for every connection, without effect", async () => {
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
    script = [
      callReply("n1", "process.run", { command: fetch("allowed.test") }),
      callReply("n2", "process.run", {
        command: `${fetch("more.test")}; ${fetch("other.test")}`,
      }),
      sayReply("done"),
    ];
    const stop = new AbortController();
    const outcome = await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
    assert.equal(outcome, "paused", "more.test waits for a person under the enforced policy");
    const ps = (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const requests = ps.flatMap((p) => (p.case === "networkRequest" ? [p.value] : []));
    assert.deepEqual(
      requests.map((r) => `${r.callId}:${r.host}:${r.decision}`),
      ["n1:allowed.test:allowed", "n2:more.test:pending", "n2:other.test:pending"],
    );
    const shadows = ps.flatMap((p) => (p.case === "policyShadow" ? [p.value] : []));
    assert.equal(shadows.length, 2, "allowed.test: the same outcome, no record");
    const [s, o] = shadows;
    assert.equal(s?.tool, "network");
    assert.equal(s?.callId, "n2");
    assert.equal(s?.summary, `connect more.test:${port}`);
    assert.equal(s?.enforced?.decision, Decision.PREVIEW_APPROVAL);
    assert.equal(s?.enforced?.rule, "network.approval=risk");
    assert.equal(s?.candidate?.decision, Decision.AUTO);
    assert.equal(s?.candidate?.rule, "network.allow");
    assert.equal(s?.candidate?.policyFile, "candidate.yaml");
    assert.equal(o?.summary, `connect other.test:${port}`);
    assert.equal(o?.candidate?.decision, Decision.DENY);
    assert.equal(o?.candidate?.rule, "network.approval=never");
  } finally {
    await t.cleanup();
  }
});
