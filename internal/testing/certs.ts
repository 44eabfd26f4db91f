/**
 * Certificates for tests, made with openssl: a CA and certificates it signs (a server's
 * for 127.0.0.1, a client's). Short-lived (2 days), in a directory the test owns.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

function openssl(cwd: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd, stdio: "ignore" });
}

/** A CA in `dir` (ca.pem, ca-key.pem) and a certificate `name` signed by it. */
export function makeCa(dir: string): void {
  mkdirSync(dir, { recursive: true });
  openssl(
    dir,
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=agentd-test-ca",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca.pem",
  );
}

export function sign(dir: string, name: string, subject: string, ext: string): void {
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(
    dir,
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    subject,
    "-keyout",
    `${name}-key.pem`,
    "-out",
    `${name}.csr`,
  );
  openssl(
    dir,
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca-key.pem",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    `${name}.ext`,
    "-out",
    `${name}-cert.pem`,
  );
}

/** A CA in `dir` with a server certificate for 127.0.0.1: server-cert.pem, server-key.pem. */
export function serverCerts(dir: string): { ca: string; cert: string; key: string } {
  makeCa(dir);
  sign(
    dir,
    "server",
    "/CN=127.0.0.1",
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  return {
    ca: join(dir, "ca.pem"),
    cert: join(dir, "server-cert.pem"),
    key: join(dir, "server-key.pem"),
  };
}
