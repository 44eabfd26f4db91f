/**
 * Tenant policies with real files: loaded at start (a broken one refuses the start naming
 * the tenant, file and line), synced with the auth file, reloaded keeping the last good;
 * hostile paths (a directory, /dev/zero, a FIFO, a huge file, a symlink loop) are errors
 * naming the tenant and the file, never a hang or an unbounded read.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { createPolicyStore } from "./policy-store.ts";
import { createTenantPolicies } from "./tenant-policies.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-tenant-policies-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const BASE = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8");
const withMode = (mode: string) =>
  BASE.replace(/repo\.patch: \{ approval: risk \}/, `repo.patch: { approval: ${mode} }`);
const serverFile = join(dir, "server.yaml");
writeFileSync(serverFile, BASE);

function logger() {
  const lines: string[] = [];
  return {
    lines,
    info: (o: object, m?: string) => void lines.push(`info ${m} ${JSON.stringify(o)}`),
    error: (o: object, m?: string) => void lines.push(`error ${m} ${JSON.stringify(o)}`),
  } as never as { lines: string[]; info: () => void; error: () => void };
}

function setup(files: Map<string, string>) {
  const log = logger();
  const server = createPolicyStore(serverFile, { logger: log });
  const tp = createTenantPolicies({ server, files: () => files, logger: log });
  return { tp, log };
}

const modeOf = (tp: ReturnType<typeof setup>["tp"], t: string) =>
  tp.forTenant(t).policy.capabilities["repo.patch"]?.approval;

it("a tenant's own file decides for it; others get the server's; reload and sync apply", () => {
  const own = join(dir, "own.yaml");
  writeFileSync(own, withMode("always"));
  const files = new Map([["acme", own]]);
  const { tp, log } = setup(files);
  assert.equal(modeOf(tp, "acme"), "always");
  assert.deepEqual(
    { source: tp.forTenant("acme").source, path: tp.forTenant("acme").path },
    { source: "tenant", path: own },
  );
  assert.equal(modeOf(tp, "globex"), "risk");
  assert.equal(tp.forTenant("globex").source, "server");
  writeFileSync(own, withMode("never"));
  tp.reload();
  assert.equal(modeOf(tp, "acme"), "never");
  // Broken: the last good stays, and the log names the tenant, file and line.
  writeFileSync(own, "version: 1\ncapabilities:\n  repo.patch: { approval: sometimes }\n");
  tp.reload();
  assert.equal(modeOf(tp, "acme"), "never");
  assert.ok(log.lines.some((l) => /tenant acme: policy reload failed/.test(l) && l.includes(own)));
  assert.ok(
    log.lines.some((l) => /capabilities\.repo\.patch\.approval/.test(l) && /"line":3/.test(l)),
  );
  // Moved to a broken file: still the last good; to a good one: that one.
  const other = join(dir, "other.yaml");
  writeFileSync(other, "nope: [");
  files.set("acme", other);
  tp.sync();
  assert.equal(modeOf(tp, "acme"), "never");
  writeFileSync(other, withMode("always"));
  tp.sync();
  assert.equal(modeOf(tp, "acme"), "always");
  // A new tenant whose file never loaded: the server's, logged as an error (never silent).
  files.set("initech", join(dir, "missing.yaml"));
  tp.sync();
  assert.equal(tp.forTenant("initech").source, "server");
  assert.ok(log.lines.some((l) => l.startsWith("error tenant initech: its policy")));
  // Removed from the auth file: the server's.
  files.delete("acme");
  tp.sync();
  assert.equal(tp.forTenant("acme").source, "server");
  tp.close();
});

it("a broken tenant file at start refuses the start, naming the tenant, file and line", () => {
  const bad = join(dir, "bad.yaml");
  writeFileSync(bad, "version: 1\ncapabilities:\n  repo.patch: { approval: sometimes }\n");
  assert.throws(
    () => setup(new Map([["acme", bad]])),
    (e: Error) =>
      e.message.startsWith(`tenant acme: invalid policy ${bad}`) && e.message.includes(`${bad}:3:`),
  );
});

it("hostile paths: a directory, /dev/zero, a FIFO, a huge file, a symlink loop, a missing file", () => {
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const huge = join(dir, "huge.yaml");
  writeFileSync(huge, `version: 1\n#${"x".repeat(2 * 1024 * 1024)}\n`);
  const loop = join(dir, "loop.yaml");
  symlinkSync(loop, loop);
  const cases: [string, RegExp][] = [
    [dir, /a directory/],
    ["/dev/zero", /not a regular file/],
    [fifo, /not a regular file/],
    [huge, /over the 1048576-byte limit/],
    [loop, /symlink loop/],
    [join(dir, "absent.yaml"), /ENOENT/],
  ];
  for (const [path, why] of cases) {
    assert.throws(
      () => setup(new Map([["acme", path]])),
      (e: Error) =>
        e.message.startsWith(`tenant acme: invalid policy ${path}`) && why.test(e.message),
      path,
    );
  }
});
