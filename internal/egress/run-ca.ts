/**
 * The per-run certificate authority of the egress proxy: a fresh key pair and self-signed CA
 * certificate for each run, which the run's sandbox trusts, and short-lived leaf
 * certificates it signs for the hosts whose traffic the proxy terminates (to add a
 * credential header the sandbox never sees; intercept.ts). X.509 encoding is left to
 * @peculiar/x509 over Node's WebCrypto (passed per call; no global provider is set); the
 * keys are EC P-256. Its 1.x line is used because it brings its own reflect-metadata (2.x
 * wants the application to load one): importing this module adds the metadata functions to
 * the global `Reflect`, and changes nothing else.
 *
 * Must never: let the CA private key out (it is a non-extractable CryptoKey held in a
 * closure, with no getter), issue a leaf for anything but one DNS name, or sign a leaf that
 * outlives the CA.
 */
import crypto from "node:crypto";
import * as x509 from "@peculiar/x509";
import { invalid } from "../errors.ts";

export interface RunCa {
  /** The CA certificate (PEM) for the sandbox's trust store. */
  certPem: string;
  /**
   * A leaf certificate and its private key (PEM) for exactly `host` (a DNS name; lower-cased),
   * signed by this CA; the same pair for the same host while it has an hour or more left.
   * Rejects (EVALIDATION) anything that is not a DNS name.
   */
  leafFor(host: string): Promise<{ certPem: string; keyPem: string }>;
}

export interface RunCaOptions {
  /** The run the CA is for; its first 12 characters name the CA. */
  runId: string;
  /** Clock in milliseconds; default Date.now. Validity is counted from it. */
  now?: () => number;
}

const HOUR = 3600_000;
/** The CA's validity: an hour back (clock skew with the sandbox) to a week ahead (a long run). */
const CA_BEFORE = HOUR;
const CA_AFTER = 7 * 24 * HOUR;
/** A leaf lives a day at most; reissued when it has under an hour left. */
const LEAF_LIFETIME = 24 * HOUR;
const LEAF_RENEW = HOUR;
/** Hosts whose leaves are kept (least recently used go first). */
const MAX_LEAVES = 64;

const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const webcrypto = crypto.webcrypto;

interface Leaf {
  certPem: string;
  keyPem: string;
  /** When to issue a new one: an hour before it expires, never when the CA ends first. */
  renewAt: number;
}

/** A new CA for `runId`: its own key pair, never shared with another run. */
export async function createRunCa(opts: RunCaOptions): Promise<RunCa> {
  const now = opts.now ?? Date.now;
  const t = now();
  const notAfter = t + CA_AFTER;
  const keys = await webcrypto.subtle.generateKey(EC, false, ["sign", "verify"]);
  const name = caName(opts.runId);
  const ca = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial(),
      name,
      notBefore: new Date(t - CA_BEFORE),
      notAfter: new Date(notAfter),
      keys,
      signingAlgorithm: EC,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
          true,
        ),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  const authorityKeyId = await x509.AuthorityKeyIdentifierExtension.create(
    keys.publicKey,
    false,
    webcrypto,
  );
  const leaves = new Map<string, Promise<Leaf>>();

  async function issue(host: string): Promise<Leaf> {
    const start = now();
    const end = Math.min(start + LEAF_LIFETIME, notAfter);
    const pair = await webcrypto.subtle.generateKey(EC, true, ["sign", "verify"]);
    const cert = await x509.X509CertificateGenerator.create(
      {
        serialNumber: serial(),
        subject: host.length <= 64 ? [{ CN: [host] }, { O: ["agentd"] }] : [{ O: ["agentd"] }],
        issuer: ca.subjectName,
        notBefore: new Date(start - CA_BEFORE),
        notAfter: new Date(end),
        publicKey: pair.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: EC,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
          new x509.SubjectAlternativeNameExtension([{ type: "dns", value: host }], false),
          authorityKeyId,
        ],
      },
      webcrypto,
    );
    const keyPem = crypto.KeyObject.from(pair.privateKey)
      .export({ type: "pkcs8", format: "pem" })
      .toString();
    const renewAt = end < notAfter ? end - LEAF_RENEW : Number.POSITIVE_INFINITY;
    return { certPem: cert.toString("pem"), keyPem, renewAt };
  }

  /** The cached leaf for `host` while it has time left, else a new one (cached, LRU-bounded). */
  async function leaf(host: string): Promise<Leaf> {
    const cached = leaves.get(host);
    if (cached !== undefined) {
      leaves.delete(host);
      leaves.set(host, cached);
      const got = await cached;
      if (now() < got.renewAt) return got;
      if (leaves.get(host) === cached) leaves.delete(host);
      return leaf(host);
    }
    const fresh = issue(host);
    leaves.set(host, fresh);
    fresh.catch(() => {
      if (leaves.get(host) === fresh) leaves.delete(host);
    });
    while (leaves.size > MAX_LEAVES) leaves.delete(leaves.keys().next().value as string);
    return fresh;
  }

  return {
    certPem: ca.toString("pem"),
    async leafFor(host: string) {
      const h = dnsName(host);
      const { certPem, keyPem } = await leaf(h);
      return { certPem, keyPem };
    },
  };
}

/** "agentd egress CA <first 12 characters of the run id>", O=agentd. */
function caName(runId: string): x509.JsonName {
  const prefix = runId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 12) || "run";
  return [{ CN: [`agentd egress CA ${prefix}`] }, { O: ["agentd"] }];
}

/** A random positive 128-bit serial number (hex). */
function serial(): string {
  const b = crypto.randomBytes(16);
  b[0] = ((b[0] as number) & 0x7f) | 0x01;
  return b.toString("hex");
}

/** `host` lower-cased if it is a DNS name (labels of letters, digits and inner hyphens). */
function dnsName(host: string): string {
  const h = typeof host === "string" ? host.toLowerCase() : "";
  const label = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
  const labels = h.split(".");
  const numeric = /^[0-9.]+$/.test(h); // an IPv4 address, not a name
  if (h.length > 253 || numeric || !labels.every((l) => label.test(l)))
    throw invalid("host", "must be a DNS name (letters, digits, hyphens and dots)");
  return h;
}
