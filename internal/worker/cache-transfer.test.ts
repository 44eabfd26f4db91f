/**
 * A cache archive enters a sandbox only if every member is under cache/ or
 * workspace/node_modules/: a tampered store file cannot write the workspace's sources.
 */
import assert from "node:assert/strict";
import { constants } from "node:buffer";
import { it } from "node:test";
import * as tar from "tar-stream";
import { archiveLimit, archiveOutputCap, checkArchive } from "./cache-transfer.ts";

async function archive(names: string[]): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on("end", () => r()));
  for (const name of names)
    if (name.endsWith("/")) pack.entry({ name, type: "directory" });
    else pack.entry({ name }, "x");
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

it("accepts /cache and node_modules members and says whether the tree is there", async () => {
  assert.deepEqual(await checkArchive(await archive(["cache/", "cache/npm/x"])), {
    installedTree: false,
  });
  assert.deepEqual(
    await checkArchive(await archive(["cache/", "workspace/node_modules/a/index.js"])),
    { installedTree: true },
  );
});

it("refuses members anywhere else, .. segments and absolute paths", async () => {
  for (const bad of [
    "workspace/src/index.js",
    "workspace/node_modules/../src/x.js",
    "cache/../workspace/x",
    "/etc/passwd",
    "cachex/y",
    "tmp/x",
    "workspace/node_modules_evil/x",
  ])
    await assert.rejects(checkArchive(await archive(["cache/", bad])), /outside \/cache/, bad);
});

/** The fields of a member the tests set; tar-stream fills in the rest. */
type Member = Partial<tar.Header> & { name: string };

async function entries(list: Member[]): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on("end", () => r()));
  for (const h of list)
    if (h.type === "file" || h.type === undefined) pack.entry(h as tar.Header, "x");
    else pack.entry(h as tar.Header);
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

it("accepts links that stay inside /cache and /workspace/node_modules (npm's .bin, pnpm's store)", async () => {
  const facts = await checkArchive(
    await entries([
      { name: "workspace/node_modules/jest/bin/jest.js", type: "file" },
      {
        name: "workspace/node_modules/.bin/jest",
        type: "symlink",
        linkname: "../jest/bin/jest.js",
      },
      { name: "cache/pnpm-store/a", type: "file" },
      { name: "workspace/node_modules/a", type: "link", linkname: "cache/pnpm-store/a" },
      { name: "cache/python/bin/py", type: "symlink", linkname: "/cache/python/lib/py" },
      { name: "cache/venv/bin/python3", type: "symlink", linkname: "/usr/bin/python3" },
    ]),
  );
  assert.deepEqual(facts, { installedTree: true });
});

it("refuses links out of /cache and /workspace/node_modules, members through a link, devices and fifos", async () => {
  const cases: [string, Member[]][] = [
    // A later setup tool writing /cache/x would write the run's sources.
    [
      "absolute symlink into the workspace",
      [{ name: "cache/x", type: "symlink", linkname: "/workspace/src/app.py" }],
    ],
    [
      "relative symlink out",
      [{ name: "workspace/node_modules/x", type: "symlink", linkname: "../src" }],
    ],
    ["symlink to /tmp", [{ name: "cache/t", type: "symlink", linkname: "/tmp" }]],
    [
      "symlink to the agent",
      [{ name: "cache/a", type: "symlink", linkname: "/.agentd/bin/busybox" }],
    ],
    ["symlink to /usr/..", [{ name: "cache/a", type: "symlink", linkname: "/usr/../workspace" }]],
    [
      "hard link to a source",
      [{ name: "cache/h", type: "link", linkname: "workspace/src/app.py" }],
    ],
    ["hard link with ..", [{ name: "cache/h", type: "link", linkname: "cache/../workspace/x" }]],
    [
      "member through a symlink of the archive",
      [
        { name: "cache/d", type: "symlink", linkname: "/cache/e" },
        { name: "cache/d/f", type: "file" },
      ],
    ],
    [
      "character device",
      [{ name: "cache/tty", type: "character-device", devmajor: 5, devminor: 0 }],
    ],
    ["block device", [{ name: "cache/sda", type: "block-device", devmajor: 8, devminor: 0 }]],
    ["fifo", [{ name: "cache/p", type: "fifo" }]],
  ];
  for (const [what, list] of cases)
    await assert.rejects(
      checkArchive(await entries([{ name: "cache/", type: "directory" }, ...list])),
      (err: Error) => /cache archive/.test(err.message),
      what,
    );
});

it("an archive's base64 never outgrows one string, whatever the store's bound (the default 2 GiB included)", () => {
  for (const bound of [2 * 1024 ** 3, 256 * 1024 ** 3, Number.MAX_SAFE_INTEGER]) {
    const limit = archiveLimit(bound);
    assert.ok(limit <= bound);
    // The collected text: the base64 of the archive, tar's status and a truncation marker.
    assert.ok(archiveOutputCap(limit) + 1024 < constants.MAX_STRING_LENGTH, String(bound));
  }
  // A small bound is the store's own, and its base64 fits the cap.
  assert.equal(archiveLimit(64 * 1024 ** 2), 64 * 1024 ** 2);
  assert.ok(archiveOutputCap(64 * 1024 ** 2) >= Math.ceil((64 * 1024 ** 2) / 3) * 4);
});
