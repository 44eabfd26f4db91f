/**
 * The set-up the kernel's decision attack tests share: the repository's policy.yaml, an
 * embedded log in a temporary directory, and a real test sandbox (the base image) holding
 * the given files, with a KernelRun over it as a drive makes one (the upload's index, and
 * the commands the workspace implies). Registers the calling file's before/after hooks;
 * read the fields inside tests only.
 * Must never: fake the sandbox, the kernel or the log.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { KernelRun } from "../kernel/kernel.ts";
import { parsePolicy } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { indexWorkspace } from "../kernel/script-probe.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { workspaceConfigFromArchive } from "../worker/workspace-config.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "./docker.ts";
import { queueRun } from "./worker-fixtures.ts";

/** The repository's own policy.yaml, parsed. */
export function repoPolicy(): Policy {
  const parsed = parsePolicy(
    readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
    "policy.yaml",
  );
  if (!parsed.ok) throw new Error("policy.yaml does not parse");
  return parsed.policy;
}

export interface DecisionBox {
  log: FileEventLog;
  box: SandboxHandle;
  run: KernelRun;
  /** A shell line in the sandbox, its stdout. */
  sh(cmd: string): Promise<string>;
}

export function decisionBox(files: WorkspaceFile[]): DecisionBox {
  const s = {} as DecisionBox;
  let dir: string | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "agentd-decision-box-"));
    s.log = await openFileEventLog({ dir });
    const t = await testSandbox();
    cleanup = t.cleanup;
    const tar = await packWorkspace(files);
    s.box = await t.sandbox.create({
      runId: ulid(),
      tenantId: "acme",
      image: sandboxImage("base"),
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: tar,
    });
    const q = await queueRun(s.log, { prompt: "p" });
    s.run = {
      ...q,
      fence: await s.log.bumpEpoch(q.runId),
      sandbox: s.box,
      baseIndex: async () => indexWorkspace(files),
      // As the drive sets it: the commands the uploaded workspace implies (drive-start.ts).
      commands: (await workspaceConfigFromArchive(tar)).commands,
    };
  });
  after(async () => {
    await cleanup?.();
    await s.log?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  s.sh = async (cmd) =>
    (await s.box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 30_000, maxOutputBytes: 4096 })).stdout;
  return s;
}
