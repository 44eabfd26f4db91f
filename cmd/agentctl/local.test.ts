/**
 * agentctl's server-less commands as a user runs them (the real binary): --version, shell
 * completion (the bash function driven as bash drives it), and contexts — precedence of
 * flags and env over the context, and every refusal naming the file and the field.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const BIN = join(import.meta.dirname, "..", "..", "bin", "agentctl");
const dir = mkdtempSync(join(tmpdir(), "agentctl-local-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const config = join(dir, "cfg", "config.yaml");

function ctl(args: string[], env: Record<string, string> = {}) {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("AGENTD_") && !k.startsWith("AGENTCTL_")) base[k] = v;
  const r = spawnSync(BIN, args, {
    env: { ...base, AGENTCTL_CONFIG: config, ...env },
    encoding: "utf8",
    timeout: 120_000, // a safety net for a hung client, never hit by a slow one
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("agentctl without a server", { timeout: 300_000 }, () => {
  it("--version and version print the package's version", () => {
    const pkg = JSON.parse(
      readFileSync(join(import.meta.dirname, "..", "..", "package.json"), "utf8"),
    );
    for (const args of [["--version"], ["version"]]) {
      const r = ctl(args);
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stdout,
        new RegExp(`^agentctl ${pkg.version.replaceAll(".", "\\.")} \\(node v`),
      );
    }
  });

  it("completion bash completes commands, subcommands and a command's flags", () => {
    const script = ctl(["completion", "bash"]).stdout;
    const complete = (line: string): string[] => {
      const words = line.split(" ");
      const r = spawnSync(
        "bash",
        [
          "-c",
          `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _agentctl; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { encoding: "utf8" },
      );
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.split("\n").filter((l) => l !== "");
    };
    assert.deepEqual(complete("agentctl ap"), ["approvals", "approve"]);
    assert.deepEqual(complete("agentctl config use"), ["use-context"]);
    assert.ok(complete("agentctl run --id").includes("--idempotency-key"));
    assert.ok(complete("agentctl runs --").includes("--selector"));
    assert.ok(complete("agentctl artifact get RUN --").includes("--out"));
    assert.equal(ctl(["completion", "fish"]).code, 64);
    assert.match(ctl(["completion", "zsh"]).stdout, /^#compdef agentctl\n/);
  });

  it("contexts: set, use, list; the file is written mode 600", () => {
    assert.equal(ctl(["config", "set-context", "local", "--server", "127.0.0.1:9"]).code, 0);
    assert.equal(ctl(["config", "use-context", "local"]).code, 0);
    assert.equal(statSync(config).mode & 0o777, 0o600);
    assert.match(ctl(["config", "get-contexts"]).stdout, /^\* local\t127\.0\.0\.1:9\t-$/m);
    assert.equal(ctl(["config", "current-context"]).stdout, "local\n");
    const bad = ctl(["config", "use-context", "nope"]);
    assert.equal(bad.code, 64);
    assert.match(bad.stderr, /has no context "nope"/);
  });

  it("the context picks the server; --addr, AGENTD_ADDR and --context override it", () => {
    const where = (r: { stderr: string }) =>
      /cannot reach agentd at (\S+) \(from ([^)]+)\)/.exec(r.stderr)?.slice(1);
    assert.deepEqual(where(ctl(["runs"])), ["http://127.0.0.1:9", "context local"]);
    assert.deepEqual(where(ctl(["runs", "--addr", "127.0.0.1:8"])), [
      "http://127.0.0.1:8",
      "--addr",
    ]);
    assert.deepEqual(where(ctl(["runs"], { AGENTD_ADDR: "127.0.0.1:7" })), [
      "http://127.0.0.1:7",
      "AGENTD_ADDR",
    ]);
    ctl(["config", "set-context", "other", "--server", "127.0.0.1:6"]);
    assert.deepEqual(where(ctl(["--context", "other", "runs"])), [
      "http://127.0.0.1:6",
      "context other",
    ]);
    assert.deepEqual(where(ctl(["runs"], { AGENTD_CONTEXT: "other" })), [
      "http://127.0.0.1:6",
      "context other",
    ]);
    const missing = ctl(["--context", "ghost", "runs"]);
    assert.equal(missing.code, 64);
    assert.match(missing.stderr, /--context names context "ghost"/);
  });

  it("a token file that is missing or readable by others, a config others may write: refused by name", () => {
    const tok = join(dir, "cfg", "prod.token");
    ctl(["config", "set-context", "prod", "--server", "127.0.0.1:5", "--token-file", "prod.token"]);
    const noFile = ctl(["--context", "prod", "runs"]);
    assert.equal(noFile.code, 64);
    assert.match(
      noFile.stderr,
      /config\.yaml: contexts\.prod\.token-file: .*prod\.token does not exist/,
    );
    writeFileSync(tok, "s3cret\n", { mode: 0o644 });
    chmodSync(tok, 0o644);
    const open = ctl(["--context", "prod", "runs"]);
    assert.match(
      open.stderr,
      /contexts\.prod\.token-file: .* is readable by group or others \(mode 644\)/,
    );
    chmodSync(tok, 0o600);
    const ok = ctl(["--context", "prod", "runs"]);
    assert.match(ok.stderr, /cannot reach agentd at http:\/\/127\.0\.0\.1:5/);
    assert.ok(!ok.stderr.includes("s3cret"), "the token is never printed");
    chmodSync(config, 0o666);
    const writable = ctl(["runs"]);
    assert.equal(writable.code, 64);
    assert.match(writable.stderr, /config\.yaml: writable by group or others \(mode 666\)/);
    chmodSync(config, 0o600);
    writeFileSync(config, "contexts:\n  prod: {addr: 5}\n", { mode: 0o600 });
    assert.match(ctl(["runs"]).stderr, /config\.yaml: contexts\.prod\.addr: /);
    writeFileSync(config, "contexts: [\n", { mode: 0o600 });
    assert.match(ctl(["runs"]).stderr, /config\.yaml: not YAML/);
    // An explicit address needs no config file at all, even a broken one.
    assert.match(
      ctl(["runs", "--addr", "127.0.0.1:4"]).stderr,
      /cannot reach agentd at http:\/\/127\.0\.0\.1:4/,
    );
  });
});
