/** readSni on real ClientHellos (Node's TLS client), cut short, and on hostile bytes. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { it } from "node:test";
import tls from "node:tls";
import { readSni } from "./sni.ts";

/** The first bytes Node's TLS client sends for `servername`. */
async function clientHello(servername: string | undefined): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const got = new Promise<Buffer>((resolve) => {
    server.once("connection", (s) => {
      s.once("data", (b: Buffer) => {
        resolve(b);
        s.destroy();
      });
    });
  });
  const c = tls.connect({
    host: "127.0.0.1",
    port,
    ...(servername === undefined ? {} : { servername }),
  });
  c.on("error", () => undefined);
  const hello = await got;
  c.destroy();
  server.close();
  return hello;
}

it("reads the server name of a real ClientHello; waits for the rest of a cut one", async () => {
  const hello = await clientHello("Registry.NPMJS.org");
  assert.deepEqual(readSni(hello), { kind: "sni", name: "registry.npmjs.org" });
  for (const n of [0, 3, 5, 40, hello.length - 1])
    assert.deepEqual(readSni(hello.subarray(0, n)), { kind: "need-more" }, `${n} bytes`);
  const none = readSni(await clientHello(undefined));
  assert.equal(none.kind, "not-tls", "an IP target sends no server name");
});

it("plain HTTP, garbage and thousands of random records: a reason, never a throw", () => {
  assert.equal(readSni(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")).kind, "not-tls");
  const long = Buffer.from([0x16, 3, 1, 0xff, 0xff]);
  assert.deepEqual(readSni(long), { kind: "not-tls", reason: "record too long" });
  for (let i = 0; i < 5000; i++) {
    const body = randomBytes(Math.floor(Math.random() * 300));
    const rec = Buffer.concat([
      Buffer.from([0x16, 3, 1, body.length >> 8, body.length & 255]),
      body,
    ]);
    const r = readSni(rec);
    assert.ok(["sni", "not-tls"].includes(r.kind));
  }
});
