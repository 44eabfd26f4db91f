/**
 * File times across a snapshot and restore in real containers: a workspace exported (through
 * the agent, the control loop and `docker exec`), normalised keeping times as a paused run's
 * snapshot is, and unpacked into a new container comes back with each file's, directory's
 * and symlink's mtime to the nanosecond on the base image (GNU tar), and each file's to the
 * second on the busybox test image; hard links between its files stay hard links (cargo's
 * target/ has them). The language tools that depend on it (Python bytecode,
 * make, node, Go) are driven through a real pause in internal/worker/restore-times.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import type { Sandbox, SandboxHandle } from "./port.ts";
import { packWorkspace } from "./workspace-archive.ts";
import { SANDBOX_EXPORT_LIMITS } from "./workspace-rules.ts";
import { normaliseWorkspaceStream } from "./workspace-stream.ts";

const UPLOAD = () =>
  packWorkspace([{ path: "f.txt", type: "file", mode: 0o644, data: Buffer.from("x\n") }]);

/** Times set in the container, then listed (GNU: nanoseconds; paths in a fixed order). */
const GNU_SETUP = [
  "set -e",
  "mkdir -p d/e",
  "echo y > d/e/g.txt",
  "ln -s f.txt l",
  "ln d/e/g.txt twin",
  "touch -d @1700000000.123456789 f.txt",
  "touch -d @1700000002.25 d/e/g.txt",
  "touch -h -d @1700000003.000000001 l",
  "touch -d @1700000001.5 d/e",
  "touch -d @1700000001.75 d",
].join("\n");
const GNU_LIST = "stat -c '%n %.9Y' f.txt d d/e d/e/g.txt l";
const GNU_TIMES = [
  "f.txt 1700000000.123456789",
  "d 1700000001.750000000",
  "d/e 1700000001.500000000",
  "d/e/g.txt 1700000002.250000000",
  "l 1700000003.000000001",
];

const sh = async (box: SandboxHandle, cmd: string): Promise<string> => {
  const r = await box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 60_000, maxOutputBytes: 65536 });
  assert.equal(r.exitCode, 0, `${cmd}: ${r.stdout}${r.stderr}`);
  return r.stdout;
};

/** The workspace of `box` as a paused run's snapshot is made (times kept). */
async function snapshot(box: SandboxHandle): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  const limits = { ...SANDBOX_EXPORT_LIMITS, keepHardLinks: true };
  const tar = normaliseWorkspaceStream(box.exportWorkspace(), limits, { keepTimes: true });
  for await (const c of tar) parts.push(c);
  return Buffer.concat(parts);
}

const spec = (image: "base" | "test") => ({
  runId: ulid(),
  tenantId: "acme",
  image: sandboxImage(image),
  limits: TEST_LIMITS,
  network: "none" as const,
});

/** A new container from `snap`, streamed in as the worker restores a snapshot. */
const restore = (sandbox: Sandbox, image: "base" | "test", snap: Buffer) =>
  sandbox.create({
    ...spec(image),
    workspace: {
      size: snap.byteLength,
      open: async function* () {
        yield snap;
      },
    },
  });

for (const via of ["the agent", "the control loop", "docker exec"] as const) {
  describe(`file times survive a snapshot and restore (export through ${via})`, () => {
    let sandbox: Sandbox;
    let cleanup: () => Promise<void>;
    before(async () => {
      ({ sandbox, cleanup } = await testSandbox({ agent: via === "the agent" }));
    });
    after(async () => {
      await cleanup();
    });

    it("GNU tar (base image): files, directories and symlinks to the nanosecond", async () => {
      const made = await sandbox.create({ ...spec("base"), workspaceTar: await UPLOAD() });
      await sh(made, GNU_SETUP);
      assert.deepEqual((await sh(made, GNU_LIST)).trim().split("\n"), GNU_TIMES);
      // A found handle has no control loop of its own: its export goes through docker exec.
      const box = via === "docker exec" ? await sandbox.find(made.runId) : made;
      assert.ok(box !== undefined);
      const snap = await snapshot(box);
      await made.destroy();
      const back = await restore(sandbox, "base", snap);
      try {
        assert.deepEqual((await sh(back, GNU_LIST)).trim().split("\n"), GNU_TIMES);
        assert.deepEqual(
          (await sh(back, "stat -c '%h %.9Y' d/e/g.txt twin")).trim().split("\n"),
          ["2 1700000002.250000000", "2 1700000002.250000000"],
          "the hard link is one file again, with its time",
        );
        // An edit after the restore is newer than everything restored.
        await sh(back, "echo z > f.txt");
        const [edited] = (await sh(back, "stat -c '%.9Y' f.txt")).trim().split("\n");
        assert.ok(Number(edited) > 1700000003, `the edit's mtime ${edited} is fresh`);
      } finally {
        await back.destroy();
      }
    });
  });
}

describe("file times with busybox tar (test image)", () => {
  let sandbox: Sandbox;
  let cleanup: () => Promise<void>;
  before(async () => {
    ({ sandbox, cleanup } = await testSandbox());
  });
  after(async () => {
    await cleanup();
  });

  it("files keep their time to the second (busybox writes no nanoseconds)", async () => {
    const made = await sandbox.create({ ...spec("test"), workspaceTar: await UPLOAD() });
    // Busybox touch takes no @seconds and sets no fraction: 2023-11-14 22:13:20 UTC is 1700000000.
    await sh(
      made,
      "mkdir -p d && echo y > d/g.txt && ln d/g.txt twin && touch -d '2023-11-14 22:13:20' f.txt && touch -d '2023-11-14 22:13:22' d/g.txt",
    );
    const list = "stat -c '%n %Y %h' f.txt d/g.txt twin";
    const want = ["f.txt 1700000000 1", "d/g.txt 1700000002 2", "twin 1700000002 2"];
    assert.deepEqual((await sh(made, list)).trim().split("\n"), want);
    const snap = await snapshot(made);
    await made.destroy();
    const back = await restore(sandbox, "test", snap);
    try {
      assert.deepEqual((await sh(back, list)).trim().split("\n"), want);
    } finally {
      await back.destroy();
    }
  });
});
