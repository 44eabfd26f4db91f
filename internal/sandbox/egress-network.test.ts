/**
 * A run's egress network on the real engine, attacked from inside the sandbox: the proxy
 * port on the gateway is the only thing it reaches. Another port of the host (on the
 * gateway and on docker0), another container, another run's gateway, DNS: all fail. The
 * network and its firewall rules go with the container.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { ulid } from "ulid";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { EGRESS_PORT } from "./egress-network.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "./port.ts";

let docker: Docker;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;
let a: SandboxHandle;
let b: SandboxHandle;
const servers: net.Server[] = [];

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 20_000, maxOutputBytes: 64 * 1024, ...extra });

/** A TCP server on host:port that answers "hello from HOST:PORT" and closes. */
function hello(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer((c) => c.end(`hello from ${host}\n`));
    servers.push(s);
    s.once("error", reject);
    s.listen(port, host, () => resolve((s.address() as net.AddressInfo).port));
  });
}

const spec = (network: "egress" | "bridge") => ({
  runId: ulid(),
  tenantId: "acme",
  image: sandboxImage("test"),
  limits: TEST_LIMITS,
  network,
});

before(async () => {
  ({ docker, sandbox, cleanup } = await testSandbox());
  [a, b] = await Promise.all([sandbox.create(spec("egress")), sandbox.create(spec("egress"))]);
});
after(async () => {
  for (const s of servers) s.close();
  await cleanup();
});

describe("a run's egress network", () => {
  it("reaches the proxy port on its gateway, with the proxy in the usual variables", async () => {
    const gw = a.egress?.host as string;
    assert.equal(a.egress?.port, EGRESS_PORT);
    await hello(gw, EGRESS_PORT);
    const r = await run(a, `nc -w 3 ${gw} ${EGRESS_PORT} </dev/null; env | sort | grep -i proxy`);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`hello from ${gw.replaceAll(".", "\\.")}`));
    assert.match(r.stdout, new RegExp(`^HTTPS_PROXY=http://${gw}:${EGRESS_PORT}$`, "m"));
    assert.match(r.stdout, /^https_proxy=/m);
    assert.match(r.stdout, /^NO_PROXY=localhost,127\.0\.0\.1,::1$/m);
  });

  it("reaches no other port of the host: not on the gateway, not on any other address", async () => {
    const gw = a.egress?.host as string;
    const other = await hello("0.0.0.0", 0);
    const docker0 = hostAddress("docker0");
    const targets = [gw, docker0, b.egress?.host as string].filter((x) => x !== undefined);
    const probes = targets.map((t) => `nc -w 2 ${t} ${other} </dev/null && echo REACHED ${t}`);
    // Another run's proxy port too: only its own run's sandbox may use it.
    probes.push(`nc -w 2 ${b.egress?.host} ${EGRESS_PORT} </dev/null && echo REACHED B-PROXY`);
    const r = await run(a, `${probes.join("; ")}; echo done`);
    assert.doesNotMatch(r.stdout, /REACHED/);
    assert.match(r.stdout, /done/);
  });

  it("reaches no other container, and resolves no name", async () => {
    const c = await sandbox.create(spec("bridge"));
    const ip = (await docker.getContainer(c.id).inspect()).NetworkSettings.Networks.bridge
      ?.IPAddress;
    await run(c, "(nc -l -p 8080 -e echo open &) ; sleep 0.2");
    const r = await run(
      a,
      `nc -w 2 ${ip} 8080 </dev/null && echo REACHED; nslookup example.com >/dev/null 2>&1 && echo RESOLVED; echo done`,
    );
    assert.doesNotMatch(r.stdout, /REACHED|RESOLVED/);
    assert.match(r.stdout, /done/);
    await c.destroy();
  });

  it("puts its firewall rules in place, and removes them and the network with the container", async () => {
    const bridge = bridgeOf(a.egress?.host as string);
    assert.ok(bridge !== undefined && existsSync(`/sys/class/net/${bridge}`));
    assert.match(rules(), new RegExp(`agentd-egress:${bridge}`));
    await a.destroy();
    assert.equal(existsSync(`/sys/class/net/${bridge}`), false);
    assert.doesNotMatch(rules(), new RegExp(`agentd-egress:${bridge}`));
  });
});

function rules(): string {
  return execFileSync("iptables", ["-w", "5", "-S"], { encoding: "utf8" });
}

function hostAddress(iface: string): string | undefined {
  try {
    const out = execFileSync("ip", ["-4", "-o", "addr", "show", iface], { encoding: "utf8" });
    return /inet (\S+)\//.exec(out)?.[1];
  } catch {
    return undefined;
  }
}

function bridgeOf(gateway: string): string | undefined {
  const out = execFileSync("ip", ["-4", "-o", "addr"], { encoding: "utf8" });
  return new RegExp(`^\\d+: (\\S+)\\s+inet ${gateway.replaceAll(".", "\\.")}/`, "m").exec(out)?.[1];
}
