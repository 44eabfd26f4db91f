/**
 * A kernel under the strict profile with `approval: reviewer` for process.run and
 * repo.patch, whose scripted reviewer model allows everything (a reviewer talked into it),
 * and a fresh real container per run: what the reviewer attack tests share. The workspace
 * holds src/a.ts (ORIGINAL), src/b.ts, an empty file and `x`.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, the embedded log).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { queued } from "../eventlog/conformance.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { createKernel, type Kernel, type KernelRun } from "../kernel/kernel.ts";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "./docker.ts";
import { scriptedReviewer, verdictText } from "./reviewer-model.ts";

/** src/a.ts as uploaded: what must still be there when a person was not asked. */
export const ORIGINAL = "export const keep = 1;\nexport const two = 2;\nexport const three = 3;\n";

const ROOT = join(import.meta.dirname, "..", "..");

export interface StrictReviewerSuite {
  /** The embedded log the kernels write to (valid once the suite's `before` ran). */
  log(): FileEventLog;
  /** A new run in its own container, and a kernel whose reviewer says allow. */
  freshRun(): Promise<{ run: KernelRun; kernel: Kernel }>;
  /** A workspace file's content as the container has it ("(missing: …)" when absent). */
  content(run: KernelRun, path: string): Promise<string>;
  /**
   * In a fresh run: `setup` first (when given; it must run, and leave src/a.ts as uploaded
   * unless `setupKeeps` is false), then `command`, which must wait for a person with
   * src/a.ts still as uploaded (the reviewer allowed it: only the kernel can stop it).
   * `watch`: the file the message shows.
   */
  assertAsked(
    command: string,
    opts?: { setup?: string | undefined; watch?: string; setupKeeps?: boolean },
  ): Promise<void>;
}

/** Registers the suite's before/after hooks (call at a test file's top level). */
export function strictReviewerSuite(): StrictReviewerSuite {
  let dir = "";
  let log: FileEventLog | undefined;
  let sandbox: Sandbox | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  let strict: Policy | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "agentd-strict-reviewer-"));
    log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
    const t = await testSandbox();
    sandbox = t.sandbox;
    cleanup = t.cleanup;
    strict = await strictWithReviewer(dir);
  });
  after(async () => {
    await cleanup?.();
    await log?.close();
    await rm(dir, { recursive: true, force: true });
  });
  const theLog = (): FileEventLog => log as FileEventLog;
  return {
    log: theLog,
    async freshRun() {
      const reviewer = scriptedReviewer(verdictText("allow", 1, "pre-approved tidy-up"));
      const runId = ulid();
      const box = await (sandbox as Sandbox).create({
        runId,
        tenantId: "t",
        image: sandboxImage("test"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: await packWorkspace([
          { path: "src/a.ts", type: "file", mode: 0o644, data: Buffer.from(ORIGINAL) },
          { path: "src/b.ts", type: "file", mode: 0o644, data: Buffer.from("other\n") },
          { path: "empty.txt", type: "file", mode: 0o644, data: Buffer.alloc(0) },
          { path: "x", type: "file", mode: 0o644, data: Buffer.from("z\n") },
        ]),
      });
      await theLog().append(queued(runId, "t"));
      const run: KernelRun = {
        runId,
        sessionId: "s1",
        fence: await theLog().bumpEpoch(runId),
        sandbox: box,
        goal: "tidy the repository",
      };
      const kernel = createKernel({
        log: theLog(),
        policy: () => strict as Policy,
        secretProviders: [],
        artifacts: new FsArtifactStore(join(dir, "artifacts")),
        reviewerModel: (id) => (id === "scripted-reviewer" ? reviewer.model : undefined),
      });
      return { run, kernel };
    },
    async assertAsked(command, opts = {}) {
      const { run, kernel } = await this.freshRun();
      if (opts.setup !== undefined) {
        const first = await kernel.handle(run, {
          callId: "c1",
          tool: "process.run",
          input: { command: opts.setup },
        });
        assert.equal(
          first.kind,
          "result",
          `setup must run: ${JSON.stringify(first).slice(0, 200)}`,
        );
        if (opts.setupKeeps !== false) assert.equal(await this.content(run, "src/a.ts"), ORIGINAL);
      }
      const out = await kernel.handle(run, {
        callId: "c2",
        tool: "process.run",
        input: { command },
      });
      const ps = (await theLog().read(run.runId, 0)).map((e) => e.event.payload);
      const v = ps.findLast((p) => p.case === "reviewerVerdict");
      const watch = opts.watch ?? "src/a.ts";
      const seen = await this.content(run, watch);
      assert.equal(
        out.kind,
        "paused",
        `must wait for a person; got ${JSON.stringify(out).slice(0, 200)} (reviewer: ${v?.case === "reviewerVerdict" ? `${v.value.verdict} ${v.value.note}` : "none"}); ${watch} now ${JSON.stringify(seen)}`,
      );
      // Nothing ran: the file is still under its name, as uploaded.
      assert.equal(await this.content(run, "src/a.ts"), ORIGINAL);
    },
    async content(run, path) {
      const r = await run.sandbox.exec({
        argv: ["cat", path],
        cwd: "/workspace",
        timeoutMs: 60_000,
        maxOutputBytes: 4096,
      });
      return r.exitCode === 0 ? r.stdout : `(missing: exit ${r.exitCode})`;
    },
  };
}

/** deploy/policies/strict.yaml with the reviewer answering first for process.run and repo.patch. */
async function strictWithReviewer(dir: string): Promise<Policy> {
  const path = join(dir, "strict-reviewer.yaml");
  await writeFile(
    path,
    [
      "version: 1",
      `extends: ${join(ROOT, "deploy/policies/strict.yaml")}`,
      "capabilities:",
      "  process.run: { approval: reviewer }",
      "  repo.patch: { approval: reviewer }",
      "reviewer:",
      "  model: scripted-reviewer",
      "  rubric: Builds and tidying are fine. Never destroy source.",
    ].join("\n"),
  );
  const r = readPolicyFile(path);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
}
