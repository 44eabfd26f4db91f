/**
 * Attack (shadow mode vs the log): roll out a stricter candidate whose `network` section
 * drops a `network.private` entry. The candidate would refuse every connection to that
 * address (the proxy's destination check: loopback/private addresses only when
 * network.private names them), yet the run's log gets no `policy.shadow` for it, so
 * `agentctl policy report` says the candidate decides every connection as the enforced one
 * does — and enforcing it then breaks the runs the report said were unaffected.
 * (The reverse, a candidate that newly allows a private address, is missed the same way.)
 *
 * Why it gets through: run-egress.ts shadowAdmit() compares only admission() of the two
 * network sections (allow list, approval mode, trust, the run's approvals) by
 * admissionClass(); `network.private` is applied later, in proxy.ts decide() via
 * checkDestination(a.check, …) on the *enforced* admission's check, and never for the
 * candidate. Both admissions say "allowed", so egress-shadow.ts differs() is not called.
 *
 * What must hold (docs/policy.md "Shadow mode", Connections too: "the run's egress proxy
 * judges every connection by the candidate's `network` section as well … one the
 * candidate would have allowed, asked for or refused differently is a `policy.shadow` with
 * tool `network`"): the connection gets one policy.shadow whose candidate side is deny; the
 * connection itself still follows the enforced policy.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { checkDestination } from "../egress/destination.ts";
import { admission } from "../egress/run-egress.ts";
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
  dir = mkdtempSync(join(tmpdir(), "agentd-attack4-egress-private-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  server = http.createServer((req, res) => res.end(`hello ${req.headers.host}`));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as net.AddressInfo).port;
  // allowed.test resolves to 127.0.0.1: the enforced policy lets it through network.private.
  enforced = allowlistPolicy({ allow: ["allowed.test"], approval: "risk" });
  // The stricter candidate: the same allow list, no private address allowed.
  candidate = allowlistPolicy({ allow: ["allowed.test"], approval: "risk", private: [] });
});
after(async () => {
  server?.close();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a candidate that drops a network.private entry: the connection it would refuse is a policy.shadow", async () => {
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
    // What the candidate, enforced, would do with it: refuse (loopback not in network.private).
    const a = admission(candidate.network, "allowed.test", port, {
      approved: new Set(),
      denied: new Set(),
    });
    assert.ok("check" in a, "the candidate's allow list admits the host");
    assert.equal(checkDestination(a.check, "allowed.test", port, ["127.0.0.1"]).ok, false);
    const shadows = ps.flatMap((p) => (p.case === "policyShadow" ? [p.value] : []));
    assert.equal(
      shadows.length,
      1,
      "the candidate (no network.private) would refuse the connection to 127.0.0.1: one policy.shadow",
    );
    assert.equal(shadows[0]?.tool, "network");
    assert.equal(shadows[0]?.candidate?.decision, Decision.DENY);
  } finally {
    await t.cleanup();
  }
});
