/**
 * scripts/build-redis-image.sh on a machine without a static busybox (the fresh-machine bug
 * of #25: "busybox is not installed"): it unpacks Debian's busybox-static package for the
 * image's /bin/sh without installing it, whether BUSYBOX points nowhere, at a dynamically
 * linked program, or busybox is simply not on the PATH. The Docker engine is faked with a
 * shim that unpacks the imported root file system into a folder, so the real images are
 * never touched; apt-get and dpkg-deb are the machine's own (Debian's mirror is reachable).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const SCRIPT = join(import.meta.dirname, "build-redis-image.sh");
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A PATH folder holding every program of /usr/bin and /usr/sbin but busybox, and a fake docker. */
function machine(): { path: string; rootfs: string } {
  const dir = mkdtempSync(join(tmpdir(), "agentd-redis-image-test-"));
  dirs.push(dir);
  const bin = join(dir, "bin");
  const rootfs = join(dir, "imported");
  mkdirSync(bin);
  mkdirSync(rootfs);
  for (const sys of ["/usr/bin", "/usr/sbin"]) {
    for (const name of readdirSync(sys)) {
      if (name === "busybox" || name === "docker" || existsSync(join(bin, name))) continue;
      symlinkSync(join(sys, name), join(bin, name));
    }
  }
  // docker: answers, has no image yet, and `import` unpacks the root file system it is given.
  writeFileSync(
    join(bin, "docker"),
    `#!/bin/bash
case "$1 $2" in
  "info "*) exit 0 ;;
  "image inspect") [ "$3" = "-f" ] && { echo 1048576; exit 0; }; exit 1 ;;
  "import "*) tar -x -C ${JSON.stringify(rootfs)}; echo sha256:0; exit 0 ;;
  *) exit 0 ;;
esac
`,
  );
  chmodSync(join(bin, "docker"), 0o755);
  return { path: bin, rootfs };
}

function build(path: string, env: Record<string, string> = {}) {
  return spawnSync("/bin/bash", [SCRIPT], {
    env: { PATH: path, HOME: process.env.HOME ?? "/root", FORCE: "1", ...env },
    encoding: "utf8",
    // apt-get download from Debian's mirror on a loaded machine: generous.
    timeout: 240_000,
  });
}

/** The image's /bin/busybox is statically linked (ldd refuses it) and runs `sh`. */
function assertStaticBusybox(rootfs: string) {
  const bb = join(rootfs, "bin", "busybox");
  assert.ok(existsSync(bb), "the image has /bin/busybox");
  const ldd = spawnSync("ldd", [bb], { encoding: "utf8" });
  assert.notEqual(ldd.status, 0, `the image's busybox is static (ldd said: ${ldd.stdout})`);
  assert.equal(readlinkSync(join(rootfs, "bin", "sh")), "busybox");
  const sh = spawnSync(bb, ["sh", "-c", "echo from-busybox"], { encoding: "utf8" });
  assert.equal(sh.stdout.trim(), "from-busybox");
}

describe("build-redis-image.sh without a static busybox on the machine", () => {
  it("busybox not on the PATH: unpacks Debian's busybox-static and builds", () => {
    const m = machine();
    const r = build(m.path);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /is not installed/);
    assert.match(r.stderr, /unpacking Debian's busybox-static package/);
    assert.match(r.stderr, /built agentd-redis:[0-9a-f]{12}/);
    assertStaticBusybox(m.rootfs);
  });

  it("BUSYBOX pointing nowhere, or at a dynamically linked program: the package's static one", () => {
    for (const bad of ["/nonexistent/busybox", "/usr/bin/ls"]) {
      const m = machine();
      const r = build(m.path, { BUSYBOX: bad });
      assert.equal(r.status, 0, `${bad}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`no static busybox at ${bad}`));
      assertStaticBusybox(m.rootfs);
    }
  });

  it("no apt-get either: stops with a message naming the package and BUSYBOX", () => {
    const m = machine();
    rmSync(join(m.path, "apt-get"));
    const r = build(m.path);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /apt-get install -y busybox-static/);
    assert.match(r.stderr, /BUSYBOX=\/path\/to\/static\/busybox/);
    assert.equal(existsSync(join(m.rootfs, "bin")), false, "nothing was imported");
  });
});
