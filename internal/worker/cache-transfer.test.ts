/**
 * A cache archive enters a sandbox only if every member is under cache/ or
 * workspace/node_modules/: a tampered store file cannot write the workspace's sources.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import * as tar from "tar-stream";
import { checkArchive } from "./cache-transfer.ts";

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
