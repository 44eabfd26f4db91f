/**
 * Security review of the egress proxy (issue #16): attacks from a hostile sandbox and a
 * hostile upstream, on loopback only. Each test asserts the SAFE behaviour, so a failing
 * test is a finding. The crash tests run the proxy in a child process (an uncaught
 * exception there must not take this runner down).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { after, before, it } from "node:test";
import { type HostRule, parseHostRule } from "./destination.ts";
import { type ConnectionRecord, createEgressProxy, type EgressProxy } from "./proxy.ts";

const servers: net.Server[] = [];
const records: ConnectionRecord[] = [];
let proxy: EgressProxy;
let proxyPort: number;
let echoPort: number;
const seenHosts: string[] = [];

async function listen(s: net.Server): Promise<number> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return (s.address() as net.AddressInfo).port;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  echoPort = await listen(
    http.createServer((req, res) => {
      seenHosts.push(String(req.headers.host));
      res.end(`upstream saw Host: ${req.headers.host}`);
    }),
  );
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  proxy = createEgressProxy({
    check: {
      rules: ["up.example.com"].map((e) => parseHostRule(e) as HostRule),
      privateAllowed,
    },
    resolve: async (host) => (host === "up.example.com" ? ["127.0.0.1"] : []),
    maxConnections: 8,
    maxTotalConnections: 50,
    idleTimeoutMs: 1000,
    connectTimeoutMs: 1000,
    onConnection: (r) => records.push(r),
  });
  proxyPort = (await proxy.listen("127.0.0.1", 0)).port;
});

after(async () => {
  await proxy?.close();
  for (const s of servers) s.close();
});

function raw(bytes: string, port = proxyPort, waitMs = 800): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(bytes));
    let got = "";
    s.on("data", (b: Buffer) => (got += b.toString("latin1")));
    s.on("error", () => undefined);
    const t = setTimeout(() => {
      s.destroy();
      resolve(got);
    }, waitMs);
    s.on("close", () => {
      clearTimeout(t);
      resolve(got);
    });
  });
}

it("forward HTTP: the Host header sent upstream is the checked URL's host (no plain-HTTP domain fronting)", async () => {
  seenHosts.length = 0;
  const out = await raw(
    `GET http://up.example.com:${echoPort}/ HTTP/1.1\r\nHost: evil.attacker.example\r\nConnection: close\r\n\r\n`,
  );
  console.log("proxy answered:", JSON.stringify(out.split("\r\n\r\n")[1]));
  assert.deepEqual(
    seenHosts,
    [`up.example.com:${echoPort}`],
    "upstream saw a Host the proxy never checked",
  );
});

it("refused CONNECTs the sandbox never closes do not lock the run's proxy (they time out)", async () => {
  // Own proxy: maxConnections 8, so the socket cap (ace4343) is 8 * 4 + 32 = 64.
  const privateAllowed = new net.BlockList();
  privateAllowed.addAddress("127.0.0.1");
  const p = createEgressProxy({
    check: { rules: [parseHostRule("up.example.com") as HostRule], privateAllowed },
    resolve: async () => ["127.0.0.1"],
    maxConnections: 8,
    idleTimeoutMs: 1000,
    connectTimeoutMs: 1000,
  });
  const port = (await p.listen("127.0.0.1", 0)).port;
  const socks: net.Socket[] = [];
  try {
    // A malformed target is refused before it is counted against maxTotalConnections.
    for (let i = 0; i < 64; i++) {
      const s = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true }, () =>
        s.write("CONNECT not-a-target HTTP/1.1\r\n\r\n"),
      );
      s.on("error", () => undefined);
      s.on("data", () => undefined);
      s.on("end", () => undefined); // read the 400 and its FIN, keep our side open
      socks.push(s);
    }
    await sleep(4000); // > headersTimeout (= connect timeout, 1 s) and idle timeout (1 s)
    const next = await raw(
      `GET http://up.example.com:${echoPort}/ HTTP/1.1\r\nHost: up.example.com\r\nConnection: close\r\n\r\n`,
      port,
    );
    console.log(
      `after 64 refused, unclosed CONNECTs and 4 s, an allowed request gets: ${JSON.stringify(next.split("\r\n")[0] ?? "")}`,
    );
    assert.match(
      next,
      /^HTTP\/1\.1 200/,
      "the run's proxy accepts nothing while the refused sockets are held",
    );
  } finally {
    for (const s of socks) s.destroy();
    await p.close();
  }
});

it("a plain-HTTP tunnel that stops mid-request is timed out and counts against the concurrency limit", async () => {
  const socks: net.Socket[] = [];
  for (let i = 0; i < 20; i++) {
    const s = net.connect(proxyPort, "127.0.0.1", () =>
      s.write(
        `CONNECT up.example.com:${echoPort} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: up.example.com\r\n`,
      ),
    );
    s.on("error", () => undefined);
    s.resume(); // reads what comes (a refusal, the proxy's close): or its FIN is never seen
    socks.push(s);
  }
  await sleep(3000); // > idle (1 s) and connect (1 s) timeouts, > maxConnections (8)
  const alive = socks.filter((s) => !s.destroyed && s.readyState === "open").length;
  // A 21st, ordinary request still works (the 20 do not count as open)?
  const next = await raw(
    `GET http://up.example.com:${echoPort}/ HTTP/1.1\r\nHost: up.example.com\r\nConnection: close\r\n\r\n`,
  );
  console.log(
    `stalled tunnels still open after 3 s: ${alive}/20 (maxConnections 8); next request: ${next.split("\r\n")[0]}`,
  );
  for (const s of socks) s.destroy();
  assert.ok(alive <= 8, `${alive} stalled tunnels held past every timeout and past maxConnections`);
});

/** A proxy in a child process, with an allowed name resolving to 127.0.0.1. */
async function childProxy(
  extra = "",
  nofile?: number,
): Promise<{ child: ChildProcess; port: number; exited: Promise<string> }> {
  const script = `
    import net from "node:net";
    import { createEgressProxy } from "${new URL("./proxy.ts", import.meta.url).pathname}";
    import { parseHostRule } from "${new URL("./destination.ts", import.meta.url).pathname}";
    const privateAllowed = new net.BlockList(); privateAllowed.addAddress("127.0.0.1");
    const p = createEgressProxy({
      check: { rules: [parseHostRule("up.example.com")], privateAllowed },
      resolve: async () => ["127.0.0.1"], idleTimeoutMs: 2000, connectTimeoutMs: 2000, ${extra}
    });
    const a = await p.listen("127.0.0.1", 0);
    console.log("PORT " + a.port);
    setInterval(() => undefined, 1000);
  `;
  const node = process.execPath;
  const argv = ["--input-type=module", "-e", script];
  const child =
    nofile === undefined
      ? spawn(node, argv, { stdio: ["ignore", "pipe", "pipe"] })
      : spawn("prlimit", [`--nofile=${nofile}`, node, ...argv], {
          stdio: ["ignore", "pipe", "pipe"],
        });
  let err = "";
  child.stderr?.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<string>((r) =>
    child.on("exit", (code, sig) =>
      r(`exit ${code ?? sig}: ${err.split("\n").slice(0, 6).join(" | ")}`),
    ),
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (b: Buffer) => {
      out += b.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    void exited.then((e) => reject(new Error(e)));
  });
  return { child, port, exited };
}

it("a hostile upstream answering with status 099 does not crash the worker's proxy", async () => {
  const up = await listen(
    net.createServer((c) =>
      c.once("data", () => c.end("HTTP/1.1 099 Bad\r\ncontent-length: 0\r\n\r\n")),
    ),
  );
  const p = await childProxy();
  try {
    await raw(
      `GET http://up.example.com:${up}/ HTTP/1.1\r\nHost: up.example.com:${up}\r\n\r\n`,
      p.port,
    );
    const state = await Promise.race([p.exited, sleep(500).then(() => "alive")]);
    console.log("proxy process:", state);
    assert.equal(state, "alive");
  } finally {
    p.child.kill();
  }
});

it("an upstream answering 101 does not leak a connection slot (the run's egress stays usable)", async () => {
  const up = await listen(
    net.createServer((c) =>
      c.once("data", () =>
        c.write(
          "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        ),
      ),
    ),
  );
  const p = await childProxy("maxConnections: 3,");
  try {
    for (let i = 0; i < 3; i++)
      await raw(`GET http://up.example.com:${up}/ HTTP/1.1\r\nHost: x\r\n\r\n`, p.port, 300);
    await sleep(3000); // past idle and connect timeouts
    const next = await raw(
      `GET http://up.example.com:${echoPort}/ HTTP/1.1\r\nHost: up.example.com\r\nConnection: close\r\n\r\n`,
      p.port,
    );
    console.log("after three 101s, an allowed request gets:", next.split("\r\n")[0]);
    assert.match(next, /^HTTP\/1\.1 200/);
  } finally {
    p.child.kill();
  }
});

it("a sandbox opening sockets until the worker's file descriptors run out does not crash it", async () => {
  const p = await childProxy("", 200);
  const socks: net.Socket[] = [];
  try {
    for (let i = 0; i < 400; i++) {
      const s = net.connect(p.port, "127.0.0.1");
      s.on("error", () => undefined);
      socks.push(s);
    }
    const state = await Promise.race([p.exited, sleep(2000).then(() => "alive")]);
    console.log("proxy process under 400 idle sockets with 200 fds:", state);
    assert.equal(state, "alive");
  } finally {
    for (const s of socks) s.destroy();
    p.child.kill();
  }
});

/** A TLS ClientHello for `name`, as a client sends it first. */
function clientHello(name: string): Promise<Buffer> {
  return new Promise((resolve) => {
    const srv = net.createServer((c) =>
      c.once("data", (b: Buffer) => {
        resolve(b);
        c.destroy();
        srv.close();
      }),
    );
    srv.listen(0, "127.0.0.1", async () => {
      const tls = await import("node:tls");
      const t = tls.connect({
        port: (srv.address() as net.AddressInfo).port,
        host: "127.0.0.1",
        servername: name,
      });
      t.on("error", () => undefined);
    });
  });
}

for (const [label, path] of [
  ["working tree", new URL("./proxy.ts", import.meta.url).pathname],
] as const) {
  it(`a tunnel whose sandbox end stops reading does not buffer the upstream in the worker's memory (${label})`, async () => {
    const MB = 1024 * 1024;
    const blob = Buffer.alloc(MB, 0x41);
    const up = await listen(
      net.createServer((c) => {
        c.on("error", () => undefined);
        c.once("data", () => {
          let sent = 0;
          const pump = (): void => {
            while (sent < 400 && c.write(blob)) sent++;
            if (sent < 400)
              c.once("drain", () => {
                sent++;
                pump();
              });
          };
          pump();
        });
      }),
    );
    const script = `
      import net from "node:net";
      const { createEgressProxy } = await import("${path}");
      const { parseHostRule } = await import("${new URL("./destination.ts", import.meta.url).pathname}");
      const privateAllowed = new net.BlockList(); privateAllowed.addAddress("127.0.0.1");
      const p = createEgressProxy({ check: { rules: [parseHostRule("up.example.com")], privateAllowed },
        resolve: async () => ["127.0.0.1"], idleTimeoutMs: 20000, connectTimeoutMs: 2000 });
      const a = await p.listen("127.0.0.1", 0);
      console.log("PORT " + a.port);
      setInterval(() => undefined, 1000);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const port = await new Promise<number>((r) => {
      let out = "";
      child.stdout?.on("data", (b: Buffer) => {
        out += b;
        const m = /PORT (\d+)/.exec(out);
        if (m) r(Number(m[1]));
      });
    });
    const rss = async (): Promise<number> => {
      const { readFileSync } = await import("node:fs");
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
      return Math.round(Number(m?.[1]) / 1024);
    };
    const hello = await clientHello("up.example.com");
    const s = net.connect(port, "127.0.0.1", () => {
      s.write(`CONNECT up.example.com:${up} HTTP/1.1\r\n\r\n`);
      s.write(hello);
    });
    s.on("error", () => undefined);
    s.once("data", () => s.pause()); // the sandbox reads the 200, then never reads again
    try {
      const before = await rss();
      await sleep(4000);
      const after = await rss();
      console.log(
        `${label}: proxy RSS ${before} MiB -> ${after} MiB while the upstream sent up to 400 MiB the client never read`,
      );
      assert.ok(
        after - before < 100,
        `the worker buffered ${after - before} MiB for one connection`,
      );
    } finally {
      s.destroy();
      child.kill();
    }
  });
}
