/**
 * The agentd image `make image` builds (scripts/build-agentd-image.sh): it runs as built —
 * `--version` of agentd and agentctl, as user 10001, without the tests or the test helpers,
 * and `agentd dev` on a read-only root file system answers /readyz and /metrics.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, it } from "node:test";

const ROOT = join(import.meta.dirname, "..");
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;

function tag(): string {
  try {
    return readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
  } catch {
    throw new Error("the agentd image is not built: run 'make image' (make test does)");
  }
}

const docker = (...args: string[]) =>
  spawnSync("docker", args, { encoding: "utf8", timeout: 60_000 });
const name = `agentd-image-test-${process.pid}`;
after(() => void docker("rm", "-f", name));

/** `docker run --rm --network none` of the image, with another entrypoint when given. */
const inImage = (image: string, entrypoint: string | undefined, ...args: string[]) =>
  docker(
    "run",
    "--rm",
    "--network",
    "none",
    ...(entrypoint === undefined ? [] : ["--entrypoint", entrypoint]),
    image,
    ...args,
  );

it("agentd and agentctl --version, as user 10001; no tests inside; its size", (t) => {
  const image = tag();
  const v = inImage(image, undefined, "--version");
  assert.equal(v.status, 0, v.stderr);
  assert.ok(v.stdout.startsWith(`agentd ${VERSION} (node v24.`), v.stdout);
  const c = inImage(image, "agentctl", "--version");
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, new RegExp(`^agentctl ${VERSION.replaceAll(".", "\\.")}`));
  const id = inImage(image, "id");
  assert.match(id.stdout, /^uid=10001\(agentd\) gid=10001\(agentd\)/);
  const inside = inImage(
    image,
    "sh",
    "-c",
    "test ! -e /opt/agentd/internal/testing && test ! -e /opt/agentd/bench && ! ls /opt/agentd/internal/api | grep -q test && ls /opt/agentd/node_modules | grep -c . ",
  );
  assert.equal(inside.status, 0, `tests or test helpers in the image: ${inside.stderr}`);
  const dev = inImage(
    image,
    "sh",
    "-c",
    "test ! -e /opt/agentd/node_modules/@biomejs && test ! -e /opt/agentd/node_modules/typescript",
  );
  assert.equal(dev.status, 0, "dev dependencies are not in the image");
  const size = Number(
    execFileSync("docker", ["image", "inspect", "-f", "{{.Size}}", image], { encoding: "utf8" }),
  );
  t.diagnostic(`${image}: ${(size / 1024 ** 2).toFixed(0)} MiB`);
  assert.ok(size < 300 * 1024 ** 2, `the image is ${(size / 1024 ** 2).toFixed(0)} MiB`);
});

it("agentd dev on a read-only root file system answers /readyz and /metrics", async () => {
  const r = docker(
    "run",
    "-d",
    "--name",
    name,
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/home/agentd:uid=10001,gid=10001",
    "-p",
    "127.0.0.1::7070",
    tag(),
    "dev",
    "--data-dir",
    "/home/agentd/data",
    "--listen",
    "0.0.0.0:7070",
  );
  assert.equal(r.status, 0, r.stderr);
  const port = docker("port", name, "7070/tcp").stdout.trim().split(":").at(-1);
  const deadline = Date.now() + 20_000;
  let ready = 0;
  while (Date.now() < deadline) {
    ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (x) => x.status,
      () => 0,
    );
    if (ready === 200) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(ready, 200, docker("logs", name).stderr);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  assert.match(
    metrics,
    new RegExp(`^agentd_build_info\\{version="${VERSION.replaceAll(".", "\\.")}"\\} 1$`, "m"),
  );
  const stop = docker("stop", "-t", "10", name);
  assert.equal(stop.status, 0);
  const code = docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.trim();
  assert.equal(code, "0", "SIGTERM: a clean stop");
});
