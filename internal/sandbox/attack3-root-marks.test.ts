/**
 * agentd's marks in a container (root-marks.ts) against the sandbox user, who wants its
 * container replaced at the next takeover on purpose (a bit told across it: a secret
 * carrying call removes the fill mark or makes the recovery marker) or wants to see them.
 * Real engine and busybox test image, with the agent and without it (docker exec per call).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { scanWritable } from "../kernel/writable-scan.ts";
import { testBoxSpec, testSandbox } from "../testing/docker.ts";
import { isRecovering, markRecovering } from "../worker/recovery-marker.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "./port.ts";
import { MARK_DIR } from "./root-marks.ts";

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 30_000, maxOutputBytes: 64 * 1024, ...extra });

const asRoot = (id: string, ...argv: string[]) =>
  execFileSync("docker", ["exec", "-u", "0:0", id, ...argv], { encoding: "utf8" });

/** Every way the sandbox user might make, remove or replace a mark; none may work. */
const TAMPER = [
  "touch /tmp/.agentd-recovering /tmp/.agentd-filled",
  `touch ${MARK_DIR}/recovering`,
  `rm -f ${MARK_DIR}/filled`,
  `rm -rf ${MARK_DIR}`,
  `mv ${MARK_DIR} /tmp/gone`,
  `chmod 777 ${MARK_DIR}`,
  `ln -s /workspace ${MARK_DIR}/recovering`,
].join("; ");

for (const agent of [true, false]) {
  describe(agent ? "with the agent" : "without the agent", () => {
    let sandbox: Sandbox;
    let cleanup: () => Promise<void>;
    before(async () => {
      ({ sandbox, cleanup } = await testSandbox({ agent }));
    });
    after(async () => {
      await cleanup();
    });

    it("the sandbox user cannot unmark a filled container nor mark it recovering", async () => {
      const h = await sandbox.create({ ...testBoxSpec(), runId: ulid() });
      await run(h, "echo kept > k.txt");
      const r = await run(h, `${TAMPER}; ls ${MARK_DIR}; echo done`);
      assert.match(r.stderr, /Permission denied/);
      assert.equal(r.stdout, "done\n", "nothing of the marks' directory is listed");
      h.detach?.();
      const found = await sandbox.find(h.runId);
      assert.ok(found !== undefined, "the container is found, not given up");
      assert.equal(await isRecovering(found), false, "and not taken for one mid-recovery");
      assert.equal((await run(found, "cat k.txt")).stdout, "kept\n");
      await found.destroy();
    });

    it("the sandbox user cannot see a mark agentd set", async () => {
      const h = await sandbox.create({ ...testBoxSpec(), runId: ulid() });
      await markRecovering(h);
      const r = await run(h, `test -e ${MARK_DIR}/recovering && echo seen || echo unseen`);
      assert.equal(r.stdout, "unseen\n");
      assert.equal(await isRecovering(h), true);
      await h.destroy();
    });

    it("the containment scan passes over the marks (nothing of the sandbox user's is there)", async () => {
      const h = await sandbox.create({ ...testBoxSpec(), runId: ulid() });
      const roots = ["/workspace", "/tmp"];
      const before = await scanWritable(h, roots);
      assert.ok(before !== undefined, "the scan is sure (an unreadable directory would fail it)");
      assert.ok(![...before.keys()].some((k) => k.startsWith(MARK_DIR)));
      await markRecovering(h);
      const after = await scanWritable(h, roots);
      assert.ok(after !== undefined);
      const moved = [...after].filter(([k, v]) => before.get(k) !== v).map(([k]) => k);
      assert.deepEqual(
        moved.filter(
          (k) => !k.startsWith("/tmp/.agentd-exec") && !k.startsWith("/tmp/.agentd-home"),
        ),
        [],
        "agentd's own mark is no write of a call",
      );
      await h.destroy();
    });

    it("a marks' directory open to others is never trusted: the look fails, naming it", async () => {
      const h = await sandbox.create({ ...testBoxSpec(), runId: ulid() });
      asRoot(h.id, "chmod", "777", MARK_DIR); // as a fault would leave it (root's own hand)
      await assert.rejects(h.mark?.("filled", "test") ?? Promise.resolve(), (err) => {
        assert.ok(isAgentdError(err, "EIO"));
        assert.match(err.message, /\/tmp\/\.agentd-root is not root's alone/);
        return true;
      });
      h.detach?.();
      await assert.rejects(sandbox.find(h.runId), /not root's alone/, "never given up on a doubt");
      await h.destroy();
    });
  });
}
