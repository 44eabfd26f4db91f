/**
 * scripts/ensure-docker.sh decides right on a machine without a Docker engine: as root
 * with apt-get it installs docker.io (unless AGENTD_INSTALL_DOCKER=0), otherwise it stops
 * with a message naming what to install. The machine is faked with shims on a PATH of
 * their own (docker that never answers, id, apt-get that only logs), so nothing is
 * installed and the real engine is never touched.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const SCRIPT = join(import.meta.dirname, "ensure-docker.sh");
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function machine(uid: number, withAptGet: boolean): { path: string; log: string } {
  const dir = mkdtempSync(join(tmpdir(), "agentd-ensure-docker-"));
  dirs.push(dir);
  const log = join(dir, "apt.log");
  const shim = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/bash\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
  shim("docker", "exit 1");
  shim("id", `echo ${uid}`);
  if (withAptGet) shim("apt-get", `echo "$*" >> ${log}`);
  return { path: dir, log };
}

function run(path: string, env: Record<string, string> = {}) {
  return spawnSync("/bin/bash", [SCRIPT], {
    env: { PATH: path, ...env },
    encoding: "utf8",
    timeout: 120_000, // a safety net for a hung script
  });
}

describe("ensure-docker.sh without an engine", () => {
  it("as root with apt-get: installs docker.io", () => {
    const m = machine(0, true);
    const r = run(m.path);
    assert.match(r.stderr, /installing docker\.io \(apt-get\)/);
    assert.match(readFileSync(m.log, "utf8"), /install -y -qq docker\.io/);
    // The shim installs nothing: the script says so instead of waiting for an engine.
    assert.equal(r.status, 1);
    assert.match(r.stderr, /did not install dockerd/);
  });

  it("as root with AGENTD_INSTALL_DOCKER=0, or not root: a message naming what to install", () => {
    for (const [uid, env] of [
      [0, { AGENTD_INSTALL_DOCKER: "0" }],
      [1000, {}],
    ] as const) {
      const m = machine(uid, true);
      const r = run(m.path, env);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /no Docker engine\. Install one \(.*apt-get install -y docker\.io/);
      assert.throws(() => readFileSync(m.log), /ENOENT/, "apt-get was not called");
    }
  });

  it("as root without apt-get: the same message", () => {
    const m = machine(0, false);
    const r = run(m.path);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no Docker engine/);
  });
});
