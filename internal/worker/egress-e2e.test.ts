/**
 * Issue #16 end to end, against real parts: a run on the base image with sandbox.network:
 * allowlist, whose scripted model uses Python's urllib and Node's fetch through the run's
 * egress proxy to local upstreams (names resolved to 127.0.0.1 by the test's resolver).
 * An allowed host answers; a host outside the list pauses the run for a person, and once
 * approved answers for the rest of the run; a denied host stays refused; a credential
 * reaches its upstream and nowhere else (not the sandbox, its environment, the events,
 * the model or the data directory); a direct connection that skips the proxy fails.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { ApprovalDecision, ApprovalResolvedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import { networkName } from "../sandbox/docker-sandbox.ts";
import { bridgeName } from "../sandbox/egress-network.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { makeCa, sign } from "../testing/certs.ts";
import { requireDocker, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { allowlistPolicy, resolveTestNames } from "../testing/egress-fixtures.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { approveInLog, callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { type DriverDeps, driveRun } from "./run-driver.ts";

const TOKEN = "ghp_Egress0nlyAtTheProxy77";
let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let deps: () => DriverDeps;
let label = "";
let policy: Policy;
/** Called before each model request is answered (a test can stop a drive at that point). */
let onAsk: (() => void) | undefined;
let httpPort = 0;
let httpsPort = 0;
let directPort = 0;
const seen: { host: string; auth: string; path: string }[] = [];
const servers: net.Server[] = [];
let directHits = 0;

/** A Python one-liner (no single quotes inside) that fetches `url` and prints what came back. */
const py = (url: string, extra = "") =>
  `python3 -c 'import urllib.request as u, urllib.error as e
r = u.Request("${url}"${extra})
try:
    print("STATUS", u.urlopen(r, timeout=10).read().decode())
except e.HTTPError as x:
    print("REFUSED", x.code, x.read().decode())
except Exception as x:
    print("FAILED", x)'`;

const listen = (s: net.Server, host = "127.0.0.1"): Promise<number> =>
  new Promise((resolve) => {
    servers.push(s);
    s.listen(0, host, () => resolve((s.address() as net.AddressInfo).port));
  });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-egress-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => {
    onAsk?.();
    return script.shift() ?? { status: 500, body: {} };
  });
  const certs = join(dir, "certs");
  makeCa(certs);
  sign(
    certs,
    "creds",
    "/CN=creds.test",
    "subjectAltName=DNS:creds.test\nextendedKeyUsage=serverAuth\n",
  );
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push({
      host: req.headers.host ?? "",
      auth: req.headers.authorization ?? "",
      path: req.url ?? "",
    });
    res.end(`hello ${req.headers.host} auth=${req.headers.authorization ?? "none"}`);
  };
  httpPort = await listen(http.createServer(handler));
  httpsPort = await listen(
    https.createServer(
      {
        cert: readFileSync(join(certs, "creds-cert.pem")),
        key: readFileSync(join(certs, "creds-key.pem")),
      },
      handler,
    ),
  );
  directPort = await listen(
    net.createServer((c) => {
      directHits++;
      c.end("direct\n");
    }),
    "0.0.0.0",
  );
  const t = await testSandbox();
  cleanup = t.cleanup;
  label = t.label;
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  policy = allowlistPolicy({
    allow: ["allowed.test", "creds.test"],
    approval: "risk",
    credentials: [
      { host: "creds.test", header: "Authorization", value: "Bearer $ENV.EGRESS_TOKEN" },
    ],
  });
  const providers = [createEnvSecretProvider({ EGRESS_TOKEN: TOKEN })];
  deps = () =>
    stubDriverDeps(
      {
        log,
        policy: { ...policy },
        sandbox: t.sandbox,
        artifacts,
        baseURL: stub.baseURL,
        secretProviders: providers,
      },
      {
        approvalHoldMs: 30_000,
        egress: {
          resolve: resolveTestNames,
          upstreamCa: readFileSync(join(certs, "ca.pem"), "utf8"),
        },
      },
    );
});
after(async () => {
  for (const s of servers) s.close();
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

function filesUnder(root: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const name of readdirSync(root)) {
    const p = join(root, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push({ path: p, text: readFileSync(p).toString("latin1") });
  }
  return out;
}

describe("a run with sandbox.network: allowlist", () => {
  it("reaches allowed hosts, asks a person for others, adds credentials at the proxy only, and cannot go around it", async () => {
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(await packWorkspace([]));
    const run = await queueRun(log, {
      prompt: "fetch things",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const stop = new AbortController();
    const networkAsks: { host: string; summary: string; callId: string }[] = [];
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case !== "approvalRequested") continue;
        const host = p.value.preview?.host ?? "";
        if (p.value.tool === "network")
          networkAsks.push({
            host,
            summary: p.value.preview?.summary ?? "",
            callId: p.value.callId,
          });
        if (host !== "denied.test") await approveInLog(log, run, p.value.approvalId);
        else
          await log.append({
            runId: run.runId,
            sessionId: run.sessionId,
            payload: {
              case: "approvalResolved",
              value: create(ApprovalResolvedSchema, {
                approvalId: p.value.approvalId,
                decision: ApprovalDecision.DENY,
                reason: "not this one",
                resolvedBy: "test",
              }),
            },
          });
      }
    })();
    const H = (name: string) => `http://${name}:${httpPort}`;
    const node = (url: string) =>
      `node -e 'fetch("${url}").then(async r => console.log("NODE", r.status, await r.text()), e => console.log("NODE FAILED", e.cause?.code ?? e.message))'`;
    const direct = `env -u HTTP_PROXY -u http_proxy python3 -c 'import socket,os
gw = os.environ["HTTPS_PROXY"].split("//")[1].split(":")[0]
for h in (gw, "172.17.0.1"):
    try:
        socket.create_connection((h, ${directPort}), 3).recv(10); print("DIRECT-OK", h)
    except Exception as x:
        print("DIRECT-FAIL", h, type(x).__name__)'`;
    script = [
      callReply("a1", "process.run", { command: py(`${H("allowed.test")}/a`) }),
      callReply("a2", "process.run", { command: py(`${H("other.test")}/b`) }),
      callReply("a3", "process.run", { command: py(`${H("other.test")}/c`) }),
      callReply("a4", "process.run", { command: py(`${H("denied.test")}/d`) }),
      callReply("a5", "process.run", { command: py(`${H("denied.test")}/e`) }),
      callReply("a6", "process.run", {
        command: py(
          `https://creds.test:${httpsPort}/f`,
          `, headers={"Authorization": "Bearer forged"}`,
        ),
      }),
      callReply("a7", "process.run", { command: direct }),
      callReply("a8", "process.run", {
        command: `${node(`${H("allowed.test")}/g`)}; ${node(`https://creds.test:${httpsPort}/h`)}`,
      }),
      callReply("a9", "process.run", {
        command: "env; ls -la /tmp/.agentd; cat /proc/1/environ | tr '\\0' '\\n'",
      }),
      sayReply("done"),
    ];
    const outcome = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), stop.signal);
    stop.abort();
    await approver;
    assert.equal(outcome, "completed");

    const events = await log.read(run.runId, 0);
    assert.equal(verifyChain(events.map((e) => e.json)).ok, true);
    const out = (id: string) => {
      const r = events.find(
        (e) => e.event.payload.case === "toolResult" && e.event.payload.value.callId === id,
      );
      return r === undefined ? "" : (r.event.payload.value as { outputJson: string }).outputJson;
    };
    assert.match(out("a1"), /STATUS hello allowed\.test/);
    assert.match(out("a2"), /REFUSED 403 .*needs a person's approval/);
    assert.match(out("a3"), /STATUS hello other\.test/);
    assert.match(out("a4"), /REFUSED 403/);
    assert.match(out("a5"), /REFUSED 403 a person denied network access to denied\.test/);
    assert.match(out("a6"), /STATUS hello creds\.test/);
    assert.match(out("a6"), /auth=\[REDACTED\]/); // the upstream echoed the credential: masked
    assert.match(out("a7"), /DIRECT-FAIL \d+\.\d+\.\d+\.\d+ .*DIRECT-FAIL 172\.17\.0\.1/s);
    assert.equal(directHits, 0);
    assert.match(out("a8"), /NODE 200 hello allowed\.test/);
    assert.match(out("a8"), /NODE 200 hello creds\.test/);
    assert.match(out("a9"), /HTTPS_PROXY=http:\/\//);

    // The person saw the host, the call and its command; asked once per host.
    assert.deepEqual(
      networkAsks.map((a) => [a.host, a.callId]),
      [
        ["other.test", "a2"],
        ["denied.test", "a4"],
      ],
    );
    assert.match(networkAsks[0]?.summary ?? "", /other\.test.*a2.*python3/s);
    // The model was told both answers.
    const told = JSON.stringify(stub.requests.map((r) => r.body));
    assert.match(told, /A person approved network access to other\.test/);
    assert.match(told, /A person denied network access to denied\.test/);

    const requests = events
      .filter((e) => e.event.payload.case === "networkRequest")
      .map(
        (e) =>
          e.event.payload.value as {
            host: string;
            decision: string;
            tls: string;
            callId: string;
            bytesDown: bigint;
          },
      );
    const of = (host: string) =>
      requests.filter((r) => r.host === host).map((r) => `${r.callId}:${r.decision}:${r.tls}`);
    assert.deepEqual(of("allowed.test"), ["a1:allowed:plain", "a8:allowed:plain"]);
    assert.deepEqual(of("other.test"), ["a2:pending:", "a3:approved:plain"]);
    assert.deepEqual(of("denied.test"), ["a4:pending:", "a5:denied:"]);
    assert.deepEqual(of("creds.test"), ["a6:allowed:intercepted", "a8:allowed:intercepted"]);
    assert.ok(requests.every((r) => r.decision !== "allowed" || r.bytesDown > 0n));

    // The credential reached its upstream, replacing the sandbox's own header…
    const credsSeen = seen.filter((s) => s.host.startsWith("creds.test"));
    assert.equal(credsSeen.length, 2);
    assert.ok(credsSeen.every((s) => s.auth === `Bearer ${TOKEN}`));
    assert.ok(
      seen
        .filter((s) => !s.host.startsWith("creds.test"))
        .every((s) => s.auth !== `Bearer ${TOKEN}`),
    );
    // …and is nowhere else: not in the sandbox's output or environment, no event, no model
    // request, no file of the data directory.
    const places = [
      ...events.map((e) => ({ path: `event ${e.event.seq} ${e.type}`, text: e.json })),
      ...stub.requests.map((r, i) => ({
        path: `model request ${i}`,
        text: JSON.stringify(r.body),
      })),
      ...filesUnder(dir),
    ];
    for (const { path, text } of places) assert.ok(!text.includes(TOKEN), `the token in ${path}`);
  });
});

describe("an allowlist run that pauses, is released and taken over", () => {
  it("keeps its approvals across containers; its network and firewall go with a pause; a takeover's proxy listens again", async () => {
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(await packWorkspace([]));
    const run = await queueRun(log, {
      prompt: "fetch across drives",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const H = (name: string) => `http://${name}:${httpPort}`;
    const fresh = (hold: number) => ({ ...deps(), approvalHoldMs: hold });
    const drive = async (d: DriverDeps, signal = new AbortController().signal) =>
      driveRun(d, run.runId, await log.bumpEpoch(run.runId), signal);
    const netName = networkName(label, run.runId);

    // Drive 1 pauses at once for the host: snapshot, container, network and rules gone.
    script = [callReply("b1", "process.run", { command: py(`${H("other.test")}/b1`) })];
    assert.equal(await drive(fresh(0)), "paused");
    const docker = await requireDocker();
    assert.equal((await docker.listNetworks({ filters: { name: [netName] } })).length, 0);
    const rules = execFileSync("iptables", ["-w", "5", "-S"], { encoding: "utf8" });
    assert.doesNotMatch(rules, new RegExp(`agentd-egress:${bridgeName(netName)}`));
    const ask = (await log.read(run.runId, 0)).findLast((e) => e.type === "approval.requested");
    assert.ok(ask?.event.payload.case === "approvalRequested");
    await approveInLog(log, run, ask.event.payload.value.approvalId);

    // Drive 2: a new container and network; the approval holds; released after its call.
    script = [
      callReply("b2", "process.run", { command: py(`${H("other.test")}/b2`) }),
      callReply("r2", "repo.search", { query: "anything" }),
    ];
    const release = new AbortController();
    let asked = 0;
    onAsk = () => {
      if (++asked === 2) release.abort();
    };
    assert.equal(await drive(fresh(30_000), release.signal), "released");
    onAsk = undefined;
    // Drive 3 (a takeover: another kernel, another proxy) finds the container and listens again.
    script = [
      callReply("b3", "process.run", { command: py(`${H("other.test")}/b3`) }),
      callReply("b4", "process.run", { command: py(`${H("elsewhere.test")}/b4`) }),
      sayReply("done"),
    ];
    const stop = new AbortController();
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal))
        if (ev.event.payload.case === "approvalRequested")
          await approveInLog(log, run, ev.event.payload.value.approvalId);
    })();
    assert.equal(await drive(fresh(30_000)), "completed");
    stop.abort();
    await approver;

    const events = await log.read(run.runId, 0);
    const net = events
      .filter((e) => e.event.payload.case === "networkRequest")
      .map((e) => {
        const v = e.event.payload.value as { host: string; decision: string; callId: string };
        return `${v.callId}:${v.host}:${v.decision}`;
      });
    assert.deepEqual(net, [
      "b1:other.test:pending",
      "b2:other.test:approved",
      "b3:other.test:approved",
      "b4:elsewhere.test:pending",
    ]);
    const told = events.filter(
      (e) => e.event.payload.case === "outputMessage" && e.event.payload.value.role === "system",
    );
    assert.equal(told.length, 2, "each answer told once, across three drives");
  });
});

describe("a sandbox that floods its proxy", () => {
  it("is cut at the policy's limits: later connections refused with the reason, the log bounded, the worker unharmed", async () => {
    const saved = policy;
    policy = {
      ...policy,
      network: {
        ...policy.network,
        limits: { ...policy.network.limits, connections: 40, concurrent: 8 },
      },
    };
    try {
      const artifacts = new FsArtifactStore(join(dir, "artifacts"));
      const info = await artifacts.put(await packWorkspace([]));
      const run = await queueRun(log, {
        prompt: "flood",
        workspaceDigest: info.digest,
        workspaceSizeBytes: info.size,
      });
      // 400 connections as fast as Python can open them, 50 threads at a time, plus 20 that
      // open a tunnel and never send a byte.
      const flood = `python3 -c 'import urllib.request as u, socket, os, concurrent.futures as f
gw, port = os.environ["HTTP_PROXY"].split("//")[1].split(":")
idle = [socket.create_connection((gw, int(port))) for _ in range(20)]
def one(i):
    try:
        return str(u.urlopen("http://allowed.test:${httpPort}/%d" % i, timeout=20).status)
    except Exception as x:
        return str(getattr(x, "code", type(x).__name__))
with f.ThreadPoolExecutor(50) as ex:
    got = list(ex.map(one, range(400)))
print("RESULTS", {k: got.count(k) for k in set(got)})
r = u.urlopen(u.Request("http://allowed.test:${httpPort}/after"), timeout=20) if False else None'`;
      script = [
        callReply("f1", "process.run", { command: flood, timeoutMs: 120_000 }),
        callReply("f2", "process.run", { command: py(`http://allowed.test:${httpPort}/after`) }),
        sayReply("done"),
      ];
      const t0 = Date.now();
      const outcome = await driveRun(
        deps(),
        run.runId,
        await log.bumpEpoch(run.runId),
        new AbortController().signal,
      );
      assert.equal(outcome, "completed");
      const events = await log.read(run.runId, 0);
      const net = events.filter((e) => e.event.payload.case === "networkRequest");
      const out = (id: string) =>
        events.find(
          (e) => e.event.payload.case === "toolResult" && e.event.payload.value.callId === id,
        )?.json ?? "";
      assert.match(out("f1"), /RESULTS .*'200': \d+/);
      assert.match(out("f1"), /'403': \d+/);
      assert.match(out("f2"), /REFUSED 403 more than 40 connections in this run/);
      assert.ok(net.length <= 40 + 100, `${net.length} network.request events`);
      assert.ok(net.length >= 40, `${net.length} network.request events`);
      assert.ok(Date.now() - t0 < 120_000);
    } finally {
      policy = saved;
    }
  });
});
