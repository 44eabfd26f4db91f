/**
 * The sandbox port's conformance suite (port.ts): what every driver must do, run against
 * each real one — docker-conformance.test.ts (the Docker engine) and
 * kubernetes/kubernetes-conformance.test.ts (the test cluster). A driver's own tests add
 * what only it has (Docker's labels and cgroup limits, a Pod's NetworkPolicy).
 *
 * Must never: skip a check for one driver, or pass on a behaviour the port does not promise.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { TEST_LIMITS } from "../testing/docker.ts";
import { collect } from "./collect.ts";
import type { ExecRequest, Sandbox, SandboxHandle, SandboxSpec } from "./port.ts";
import { packWorkspace, readWorkspaceArchive } from "./workspace-archive.ts";

export interface ConformanceTarget {
  /** A driver instance (its sandboxes are this suite's alone). */
  sandbox: Sandbox;
  /** Another instance of the same driver and deployment (a second worker). */
  other: Sandbox;
  /** An image with sh and the agent. */
  image: string;
  /** Removes the run's sandbox behind the driver's back (docker rm -f, a Pod deleted). */
  removeBehindBack(runId: string): Promise<void>;
  cleanup(): Promise<void>;
}

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 20_000, maxOutputBytes: 64 * 1024, ...extra });

export function sandboxConformance(driver: string, setup: () => Promise<ConformanceTarget>): void {
  describe(`sandbox port conformance: ${driver}`, () => {
    let t: ConformanceTarget;
    let box: SandboxHandle;
    let spec: SandboxSpec;

    before(async () => {
      t = await setup();
      spec = {
        runId: ulid(),
        tenantId: "acme",
        image: t.image,
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace([
          { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hi\n") },
          {
            path: "dir/run.sh",
            type: "file",
            mode: 0o755,
            data: Buffer.from("#!/bin/sh\necho ran\n"),
          },
        ]),
      };
      box = await t.sandbox.create(spec);
    });
    after(async () => {
      await t?.sandbox.reap(() => false).catch(() => undefined);
      await t?.cleanup();
    });

    it("fills the workspace and runs calls there as uid 1000 without capabilities", async () => {
      const r = await run(
        box,
        "id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; cat hello.txt; ./dir/run.sh; pwd",
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(
        r.stdout,
        "1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nhi\nran\n/workspace\n",
      );
    });

    it("keeps stdout, stderr and the exit code apart, and takes stdin", async () => {
      const r = await run(box, "echo out; echo err >&2; exit 7");
      assert.deepEqual([r.exitCode, r.stdout, r.stderr], [7, "out\n", "err\n"]);
      const s = await box.exec({
        argv: ["cat"],
        timeoutMs: 10_000,
        maxOutputBytes: 1024,
        stdin: Buffer.from("in"),
      });
      assert.equal(s.stdout, "in");
    });

    it("kills a call at its timeout, with what it started in the background", async () => {
      const r = await run(box, "(sleep 3; echo late > /tmp/late) & sleep 30", { timeoutMs: 500 });
      assert.equal(r.timedOut, true);
      const after = await run(box, "sleep 4; cat /tmp/late 2>/dev/null || echo none");
      assert.equal(after.stdout, "none\n", "the background child died with the call");
    });

    it("cuts output at its cap and stops on a cancel", async () => {
      const c = await run(box, "yes | head -c 200000", { maxOutputBytes: 1000 });
      assert.equal(c.truncated, true);
      assert.ok(c.stdout.length <= 1200);
      const ac = new AbortController();
      const p = run(box, "sleep 30", { signal: ac.signal });
      setTimeout(() => ac.abort(), 300);
      assert.equal((await p).cancelled, true);
    });

    it("streams the workspace out and diffs it against what it started from", async () => {
      assert.equal((await run(box, "echo new > added.txt && echo ho > hello.txt")).exitCode, 0);
      const files = await readWorkspaceArchive(await collect(box.exportWorkspace()));
      assert.equal(files.find((f) => f.path === "added.txt")?.data?.toString(), "new\n");
      const d = await box.diff();
      assert.match(d.patch, /\+\+\+ b\/added\.txt/);
      assert.match(d.patch, /-hi\n\+ho/);
    });

    it("keeps agentd's marks where calls cannot touch them", async () => {
      assert.equal(await box.mark?.("recovering", "test"), false);
      assert.equal(await box.mark?.("recovering", "set"), true);
      assert.equal(await box.mark?.("recovering", "test"), true);
      const r = await run(
        box,
        "ls -la /tmp/.agentd-root 2>&1; rm -rf /tmp/.agentd-root 2>&1; true",
      );
      assert.match(r.stdout, /Permission denied/);
      assert.equal(await box.mark?.("recovering", "test"), true);
      await box.mark?.("recovering", "clear");
      assert.equal(await box.mark?.("recovering", "test"), false);
    });

    it("is found by another instance (a worker's takeover), and only for its own run", async () => {
      const found = await t.other.find(spec.runId);
      assert.ok(found, "found");
      assert.equal((await run(found, "cat added.txt")).stdout, "new\n");
      await found.killAll();
      found.detach?.();
      assert.equal(await t.other.find(ulid()), undefined);
    });

    it("a sandbox removed behind its back is lost, and not found", async () => {
      const id = ulid();
      const h = await t.sandbox.create({ ...spec, runId: id });
      assert.equal(await h.lost?.(), false);
      await t.removeBehindBack(id);
      await assert.rejects(run(h, "sleep 30"));
      assert.equal(await h.lost?.(), true);
      assert.equal(await t.sandbox.find(id), undefined);
    });

    it("destroy removes it; reap removes what is no longer live", async () => {
      const id = ulid();
      const h = await t.sandbox.create({ ...spec, runId: id });
      assert.deepEqual(await t.sandbox.reap((r) => r !== id), [id]);
      assert.equal(await t.sandbox.find(id), undefined);
      await h.destroy();
      await box.destroy();
      assert.equal(await box.lost?.(), true);
      assert.equal(await t.sandbox.find(spec.runId), undefined);
    });
  });
}
