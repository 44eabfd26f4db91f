/**
 * agentd's command line as a user meets it (the real binary): --version, hash-token's help
 * and stdin form, each command's --help listing every flag it takes (and refusing the
 * others by name), and a port already in use reported in one line.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { hashToken } from "../../internal/auth/tokens.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "agentd");
const dir = mkdtempSync(join(tmpdir(), "agentd-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function agentd(args: string[], input?: string) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("AGENTD_") && !k.startsWith("OPENAI_")) env[k] = v;
  const r = spawnSync(BIN, args, { env, encoding: "utf8", timeout: 30_000, input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("agentd's command line", { timeout: 90_000 }, () => {
  it("--version prints the package's version", () => {
    const pkg = JSON.parse(
      readFileSync(join(import.meta.dirname, "..", "..", "package.json"), "utf8"),
    );
    const r = agentd(["--version"]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.startsWith(`agentd ${pkg.version} (node v`), r.stdout);
  });

  it("an empty OPENAI_BASE_URL (as compose files pass it) counts as not set", () => {
    const r = spawnSync(BIN, ["--version"], {
      env: { PATH: process.env.PATH ?? "", OPENAI_BASE_URL: "", OPENAI_API_KEY: "" },
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
  });

  it("hash-token --help helps (it never hashes '--help'); - reads the token from stdin", () => {
    const help = agentd(["hash-token", "--help"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: agentd hash-token TOKEN/);
    assert.ok(!help.stdout.includes(hashToken("--help")));
    assert.equal(agentd(["hash-token", "-"], "s3cret\n").stdout, `${hashToken("s3cret")}\n`);
    assert.equal(agentd(["hash-token", "s3cret"]).stdout, `${hashToken("s3cret")}\n`);
    assert.equal(agentd(["hash-token"]).code, 2);
  });

  it("each command's --help lists the flags it reads; another command's flag is refused by name", () => {
    const server = agentd(["server", "--help"]).stdout;
    for (const f of [
      "tenant-limit",
      "lease-ttl-ms",
      "redis-timeout-ms",
      "cancel-wait-ms",
      "event-log",
      "listen",
      "export-config",
    ])
      assert.match(server, new RegExp(`^  --${f}\\b`, "m"), f);
    assert.match(server, /--listen VALUE\n.*\(default 127\.0\.0\.1:7070\)/);
    const worker = agentd(["worker", "--help"]).stdout;
    for (const f of [
      "concurrency",
      "lease-ttl-ms",
      "redis-timeout-ms",
      "shutdown-grace-ms",
      "listen",
    ])
      assert.match(worker, new RegExp(`^  --${f}\\b`, "m"), f);
    // The worker's health port is off unless asked for: no default shown.
    assert.match(worker, /--listen VALUE\n[^\n]*off unless set\n\s+env: AGENTD_LISTEN/);
    assert.doesNotMatch(agentd(["worker", "--help"]).stdout, /--export-config/);
    const refused = agentd(["server", "--concurrency", "2"]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--concurrency is not a flag of agentd server/);
  });

  it("--cors-origins takes origins only, naming the flag and the bad entry", () => {
    for (const bad of ["https://console.example.com/path", "ftp://x.example", "*", "not a url"]) {
      const r = agentd([
        "server",
        "--insecure-no-auth",
        "--cors-origins",
        `https://ok.example,${bad}`,
      ]);
      assert.equal(r.code, 2, bad);
      assert.match(r.stderr, /--cors-origins \(AGENTD_CORS_ORIGINS\): /, bad);
    }
  });

  it("the upload flags are listed and a bad value is refused naming the flag", () => {
    for (const cmd of ["server", "dev"]) {
      const help = agentd([cmd, "--help"]).stdout;
      assert.match(help, /^ {2}--max-uploads-per-tenant\b/m, cmd);
      assert.match(help, /^ {2}--upload-idle-ms\b/m, cmd);
      assert.match(help, /^ {2}--upload-min-bytes-per-s\b/m, cmd);
    }
    assert.doesNotMatch(agentd(["worker", "--help"]).stdout, /--upload-idle-ms/);
    for (const [flag, bad] of [
      ["--max-uploads-per-tenant", "0"],
      ["--max-uploads-per-tenant", "two"],
      ["--upload-idle-ms", "10"],
      ["--upload-idle-ms", "-5"],
      ["--upload-min-bytes-per-s", "-1"],
      ["--upload-min-bytes-per-s", "fast"],
    ] as const) {
      const r = agentd(["server", "--insecure-no-auth", `${flag}=${bad}`]);
      assert.equal(r.code, 2, `${flag} ${bad}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`${flag} \\(AGENTD_[A-Z_]+\\): `), `${flag} ${bad}`);
    }
  });

  it("--rate-limit (AGENTD_RATE_LIMIT): listed for server and dev, not worker; a bad rate names the flag", () => {
    for (const cmd of ["server", "dev"])
      assert.match(
        agentd([cmd, "--help"]).stdout,
        /^ {2}--rate-limit VALUE\n.*\(default off\)\n\s+env: AGENTD_RATE_LIMIT/m,
        cmd,
      );
    assert.doesNotMatch(agentd(["worker", "--help"]).stdout, /--rate-limit/);
    for (const bad of ["20", "0/s", "20/h", "20/s,burst=0"]) {
      const r = agentd(["server", "--insecure-no-auth", "--rate-limit", bad]);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /--rate-limit \(AGENTD_RATE_LIMIT\): .*(not a rate|above 0|burst)/,
        bad,
      );
    }
  });

  it("a tenant's broken or hostile policy file stops the start (dev and worker), naming the tenant, file and line", () => {
    const bad = join(dir, "tenant-bad.yaml");
    writeFileSync(bad, "version: 1\ncapabilities:\n  repo.patch: { approval: sometimes }\n");
    const auth = (policy: string) => {
      const file = join(dir, "tenant-auth.yaml");
      writeFileSync(
        file,
        `tokens:\n  - { sha256: ${hashToken("t")}, tenant: acme, roles: [read] }\ntenants:\n  acme: { policy: ${policy} }\n`,
      );
      return file;
    };
    const r = agentd(["dev", "--data-dir", join(dir, "tp"), "--auth-file", auth(bad)]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`tenant acme: invalid policy ${bad} \\(1 issue\\)`));
    assert.match(r.stderr, new RegExp(`${bad}:3:27: capabilities\\.repo\\.patch\\.approval`));
    for (const [path, why] of [
      ["/dev/zero", /not a regular file/],
      [dir, /a directory/],
    ] as const) {
      const w = agentd(["worker", "--event-log", "redis://127.0.0.1:1", "--auth-file", auth(path)]);
      assert.equal(w.code, 1, w.stderr);
      assert.match(w.stderr, new RegExp(`tenant acme: invalid policy ${path}`));
      assert.match(w.stderr, why);
    }
  });

  it("a broken or hostile candidate (--shadow-policy, tenants.<id>.shadowPolicy) stops the start, naming the flag or field and the file", () => {
    const bad = join(dir, "shadow-bad.yaml");
    writeFileSync(bad, "version: 1\ncapabilities:\n  repo.patch: { approval: sometimes }\n");
    const flag = agentd(["dev", "--data-dir", join(dir, "sp"), "--shadow-policy", bad]);
    assert.equal(flag.code, 1, flag.stderr);
    assert.match(flag.stderr, new RegExp(`--shadow-policy: .*${bad}`));
    assert.match(flag.stderr, /capabilities\.repo\.patch\.approval/);
    const w = agentd([
      "worker",
      "--event-log",
      "redis://127.0.0.1:1",
      "--shadow-policy",
      "/dev/zero",
    ]);
    assert.equal(w.code, 1, w.stderr);
    assert.match(w.stderr, /--shadow-policy: invalid policy \/dev\/zero[\s\S]*not a regular file/);
    const file = join(dir, "shadow-auth.yaml");
    writeFileSync(
      file,
      `tokens:\n  - { sha256: ${hashToken("t")}, tenant: acme, roles: [read] }\ntenants:\n  acme: { shadowPolicy: ${bad} }\n`,
    );
    const t = agentd(["dev", "--data-dir", join(dir, "sp2"), "--auth-file", file]);
    assert.equal(t.code, 1, t.stderr);
    assert.match(t.stderr, new RegExp(`tenant acme: invalid shadowPolicy ${bad} \\(1 issue\\)`));
  });

  it("--artifact-store redis needs a Redis event log; a bad retention names the flag", () => {
    const dev = agentd(["dev", "--data-dir", join(dir, "d"), "--artifact-store", "redis"]);
    assert.equal(dev.code, 2, dev.stderr);
    assert.match(dev.stderr, /--artifact-store redis needs a Redis event log/);
    const bad = agentd(["server", "--insecure-no-auth", "--artifact-retention", "5y"]);
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /--artifact-retention \(AGENTD_ARTIFACT_RETENTION\): must be a duration/,
    );
  });

  it("--archive-dir (AGENTD_ARCHIVE_DIR) is a server and dev flag; a path that is no directory stops the start", () => {
    for (const cmd of ["server", "dev"])
      assert.match(
        agentd([cmd, "--help"]).stdout,
        /^ {2}--archive-dir VALUE\n.*archive each run.*\n\s+env: AGENTD_ARCHIVE_DIR/m,
        cmd,
      );
    const worker = agentd(["worker", "--archive-dir", join(dir, "a")]);
    assert.equal(worker.code, 2);
    assert.match(worker.stderr, /--archive-dir is not a flag of agentd worker/);
    const file = join(dir, "not-a-dir");
    writeFileSync(file, "x");
    for (const args of [
      ["dev", "--data-dir", join(dir, "dev-archive"), "--archive-dir", file],
      ["dev", "--data-dir", join(dir, "dev-archive"), "--archive-dir", join(file, "sub")],
    ]) {
      const r = agentd(args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(
        r.stderr,
        /--archive-dir \(AGENTD_ARCHIVE_DIR\): cannot use .*not-a-dir.* as the archive directory/,
      );
    }
  });

  it("--retention is off by default, takes a duration with a unit, and names the flag and env when bad", () => {
    for (const cmd of ["server", "dev"]) {
      const help = agentd([cmd, "--help"]).stdout;
      assert.match(
        help,
        /^ {2}--retention VALUE\n[^\n]*\(default off\)\n\s+env: AGENTD_RETENTION$/m,
        cmd,
      );
      assert.match(help, /^ {2}--retention-sweep-ms VALUE\n/m, cmd);
    }
    // Workers never sweep: they have no auth file, so no tenant's override.
    assert.doesNotMatch(agentd(["worker", "--help"]).stdout, /--retention/);
    for (const bad of ["30", "-1d", "0s", "7 days", "1.5ms", "999999w", ""]) {
      const r = agentd(["server", "--insecure-no-auth", `--retention=${bad}`]);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
      assert.match(r.stderr, /--retention \(AGENTD_RETENTION\): .*or off/, bad);
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      AGENTD_RETENTION: "forever",
    };
    const x = spawnSync(BIN, ["server", "--insecure-no-auth"], {
      env,
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(x.status, 2, x.stderr);
    assert.match(x.stderr, /--retention \(AGENTD_RETENTION\): must be a number and a unit/);
    const slow = agentd(["server", "--insecure-no-auth", "--retention-sweep-ms", "5"]);
    assert.equal(slow.code, 2);
    assert.match(slow.stderr, /--retention-sweep-ms \(AGENTD_RETENTION_SWEEP_MS\): /);
  });

  it("a broken export config stops the start: every problem by file, line and field", () => {
    const file = join(dir, "export.yaml");
    writeFileSync(
      file,
      "sinks:\n  - name: hook\n    type: webhook\n    url: ftp://nope\n    secret: $ENV.AGENTD_TEST_UNSET_KEY\n",
    );
    // The config is read before anything is opened: no Redis is needed to be refused.
    const r = agentd([
      "server",
      "--event-log",
      "redis://127.0.0.1:1",
      "--insecure-no-auth",
      "--export-config",
      file,
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`${file}:4:10: sinks\\.0\\.url: must be an http:// or https:// URL`),
    );
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  });

  it("an export sink URL with credentials stops the start (flag and env), never echoed", () => {
    const file = join(dir, "export-creds.yaml");
    writeFileSync(
      file,
      "sinks:\n  - name: otel\n    type: otlp-logs\n    endpoint: https://user:Hunter2-PASS-77@collector:4318/v1/logs\n",
    );
    const base = ["server", "--event-log", "redis://127.0.0.1:1", "--insecure-no-auth"];
    for (const r of [
      agentd([...base, "--export-config", file]),
      (() => {
        const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
        env.AGENTD_EXPORT_CONFIG = file;
        const x = spawnSync(BIN, base, { env, encoding: "utf8", timeout: 30_000 });
        return { code: x.status, stdout: x.stdout, stderr: x.stderr };
      })(),
    ]) {
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /:4:\d+: sinks\.0\.endpoint: must not carry credentials/);
      assert.doesNotMatch(r.stdout + r.stderr, /Hunter2-PASS-77/);
    }
  });

  it("a port already in use is one clear line, exit 1, no stack trace", async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
    const port = (busy.address() as net.AddressInfo).port;
    try {
      const r = agentd([
        "server",
        "--listen",
        `127.0.0.1:${port}`,
        "--insecure-no-auth",
        "--event-log",
        `file:${join(dir, "log")}`,
      ]);
      assert.equal(r.code, 1);
      assert.equal(
        r.stderr.trim(),
        `agentd: cannot listen on 127.0.0.1:${port}: the address is already in use (another agentd? pick another with --listen)`,
      );
    } finally {
      busy.close();
    }
  });
});
