/**
 * The per-run CA: its certificate is a CA for one level, a leaf it issues is signed by it
 * and names exactly its host, a real TLS handshake on loopback accepts the leaf for that
 * name only, runs do not share CAs, and leaves are cached per host and renewed near expiry.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import type net from "node:net";
import { it } from "node:test";
import tls from "node:tls";
import * as x509 from "@peculiar/x509";
import { isAgentdError } from "../errors.ts";
import { createRunCa } from "./run-ca.ts";

it("the CA is self-signed, a CA of path length 0 named for the run, valid an hour back to a week ahead", async () => {
  const t = Date.parse("2026-03-01T12:00:00Z");
  const ca = await createRunCa({ runId: "01JABCDEFGHJKMNPQRST", now: () => t });
  const cert = new crypto.X509Certificate(ca.certPem);
  assert.equal(cert.ca, true);
  assert.equal(cert.subject, "CN=agentd egress CA 01JABCDEFGHJ\nO=agentd");
  assert.equal(cert.issuer, cert.subject);
  assert.ok(cert.verify(cert.publicKey));
  assert.equal(Date.parse(cert.validFrom), t - 3600_000);
  assert.equal(Date.parse(cert.validTo), t + 7 * 24 * 3600_000);
  const text = cert.toLegacyObject();
  assert.equal(text.asn1Curve, "prime256v1");
  assert.equal("privateKey" in ca || "keyPem" in ca, false);
  const parsed = new x509.X509Certificate(ca.certPem);
  const bc = parsed.getExtension(x509.BasicConstraintsExtension);
  assert.deepEqual([bc?.ca, bc?.pathLength, bc?.critical], [true, 0, true]);
  const ku = parsed.getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
  assert.ok(ku & x509.KeyUsageFlags.keyCertSign);
});

it("a leaf names exactly its host, is signed by the CA and is for server authentication", async () => {
  const ca = await createRunCa({ runId: "run-a" });
  const caCert = new crypto.X509Certificate(ca.certPem);
  const leaf = await ca.leafFor("API.Test");
  const cert = new crypto.X509Certificate(leaf.certPem);
  assert.ok(cert.verify(caCert.publicKey));
  assert.ok(cert.checkIssued(caCert));
  assert.equal(cert.ca, false);
  assert.equal(cert.subjectAltName, "DNS:api.test");
  assert.equal(cert.checkHost("api.test"), "api.test");
  assert.equal(cert.checkHost("other.test"), undefined);
  assert.equal(cert.checkHost("x.api.test"), undefined);
  assert.deepEqual(cert.keyUsage, ["1.3.6.1.5.5.7.3.1"]);
  assert.ok(cert.checkPrivateKey(crypto.createPrivateKey(leaf.keyPem)));
  assert.ok(Date.parse(cert.validTo) <= Date.now() + 24 * 3600_000 + 1000);
});

it("TLS with the leaf is accepted for its host by a client trusting the CA, refused for another name", async () => {
  const ca = await createRunCa({ runId: "run-tls" });
  const leaf = await ca.leafFor("api.test");
  const server = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) => s.end("hi"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const dial = (servername: string, trust: string) =>
    new Promise<string>((resolve, reject) => {
      const s = tls.connect({ host: "127.0.0.1", port, servername, ca: trust }, () => {
        let got = "";
        s.on("data", (b: Buffer) => (got += b.toString()));
        s.on("end", () => resolve(got));
      });
      s.on("error", reject);
    });
  try {
    assert.equal(await dial("api.test", ca.certPem), "hi");
    await assert.rejects(dial("other.test", ca.certPem), /ERR_TLS_CERT_ALTNAME_INVALID/);
    const stranger = await createRunCa({ runId: "run-other" });
    await assert.rejects(dial("api.test", stranger.certPem), (e: NodeJS.ErrnoException) =>
      /UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify/i.test(`${e.code} ${e.message}`),
    );
  } finally {
    server.close();
  }
});

it("two runs get different CA keys; leaves are cached per host and renewed an hour before they expire", async () => {
  let t = Date.now();
  const a = await createRunCa({ runId: "run-1", now: () => t });
  const b = await createRunCa({ runId: "run-1" });
  const ka = new crypto.X509Certificate(a.certPem).publicKey.export({ format: "jwk" });
  const kb = new crypto.X509Certificate(b.certPem).publicKey.export({ format: "jwk" });
  assert.notDeepEqual(ka, kb);
  const [l1, l2] = await Promise.all([a.leafFor("api.test"), a.leafFor("api.test")]);
  assert.deepEqual(l1, l2);
  assert.deepEqual(await a.leafFor("API.TEST"), l1);
  assert.notDeepEqual(await a.leafFor("other.test"), l1);
  t += 23 * 3600_000 + 1;
  const renewed = await a.leafFor("api.test");
  assert.notEqual(renewed.certPem, l1.certPem);
  assert.equal(Date.parse(new crypto.X509Certificate(renewed.certPem).validTo) > t, true);
});

it("a leaf never outlives the CA, and no leaf is issued for an address or a malformed name", async () => {
  let t = Date.now();
  const ca = await createRunCa({ runId: "run-end", now: () => t });
  t += 7 * 24 * 3600_000 - 600_000; // ten minutes before the CA expires
  const leaf = await ca.leafFor("api.test");
  const caEnd = Date.parse(new crypto.X509Certificate(ca.certPem).validTo);
  assert.equal(Date.parse(new crypto.X509Certificate(leaf.certPem).validTo), caEnd);
  assert.deepEqual(await ca.leafFor("api.test"), leaf);
  for (const bad of ["127.0.0.1", "", "a..b", "-x.test", "x_y.test", "*.test", "a b"]) {
    await assert.rejects(ca.leafFor(bad), (e) => isAgentdError(e, "EVALIDATION"), bad);
  }
});

it("at most 64 hosts keep their leaves: the least recently used goes first", async () => {
  const ca = await createRunCa({ runId: "run-lru" });
  const first = await ca.leafFor("h0.test");
  for (let i = 1; i < 64; i++) await ca.leafFor(`h${i}.test`);
  assert.deepEqual(await ca.leafFor("h0.test"), first); // used again: now the most recent
  const second = await ca.leafFor("h1.test");
  await ca.leafFor("h64.test"); // one too many: h2 is the least recently used
  assert.deepEqual(await ca.leafFor("h0.test"), first);
  assert.deepEqual(await ca.leafFor("h1.test"), second);
  await ca.leafFor("h65.test"); // evicts h3
  const h2 = await ca.leafFor("h2.test"); // reissued, evicting h4
  assert.equal(new crypto.X509Certificate(h2.certPem).subjectAltName, "DNS:h2.test");
});
