/**
 * Test harness: a real run paused for an approval and resumed in a new container from its
 * workspace snapshot, as a worker does (the embedded event log, the artifact store, the
 * kernel, real containers, the AI SDK against a scripted model). The model runs `before`,
 * then a call that needs a person (`rm`), which pauses the run (no hold: the container goes,
 * the snapshot stays); a person approves; the run resumes from the snapshot and the model
 * runs `after`. Returns every tool result by call id. For tests of what a restored workspace
 * looks like to the tools in it (file times: internal/worker/restore-times*.test.ts). With
 * `network` (a registry preset), the run's setup step installs the workspace's dependencies
 * through the egress proxy before `before`, and again in the new container after the resume.
 * Must never: let a run complete without the pause and the restore having happened.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { PresetName } from "../kernel/network-presets.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { driveRun } from "../worker/run-driver.ts";
import { nonPublicAddresses } from "./corpus.ts";
import { requireDocker, testSandbox } from "./docker.ts";
import { stubDriverDeps } from "./driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "./openai-stub.ts";
import { approveInLog, callReply, queueRun, sayReply, testImagePolicy } from "./worker-fixtures.ts";

/** One call the scripted model makes. */
export interface Step {
  id: string;
  tool: string;
  args: unknown;
}

/** What a tool call returned (a previewed call's `result`, unwrapped). */
export interface StepResult {
  ok: boolean;
  error: string;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
}

export interface PauseRestore {
  /**
   * Runs `before`, pauses (snapshot, container removed), resumes in a new container from
   * the snapshot and runs `after`. Asserts the pause and the restore happened.
   */
  run(opts: {
    image: string;
    files: readonly WorkspaceFile[];
    before: readonly Step[];
    after: readonly Step[];
    network?: PresetName;
  }): Promise<Map<string, StepResult>>;
  close(): Promise<void>;
}

/** Fails (never skips) when `image` is not there, naming what builds it. */
export async function requireImage(image: string): Promise<void> {
  const docker = await requireDocker();
  await docker
    .getImage(image)
    .inspect()
    .catch((err: unknown) => {
      throw new Error(
        `the sandbox image ${image} is not there (${(err as Error).message}): run 'make images'`,
      );
    });
}

/** The stdout of a call that must have succeeded (ok, exit 0). */
export function stdoutOf(results: Map<string, StepResult>, id: string): string {
  const r = results.get(id);
  assert.ok(r !== undefined, `no result for ${id}`);
  assert.ok(r.ok, `${id}: ${r.error}`);
  assert.equal(r.exitCode, 0, `${id}: ${r.stdout} ${r.stderr}`);
  return r.stdout ?? "";
}

export const file = (path: string, text: string, mode = 0o644): WorkspaceFile => ({
  path,
  type: "file",
  mode,
  data: Buffer.from(text),
});

/** process.run of `command`. */
export const sh = (id: string, command: string): Step => ({
  id,
  tool: "process.run",
  args: { command, timeoutMs: 240_000 },
});

/** repo.patch of `path`: one exact-text edit. */
export const edit = (id: string, path: string, oldText: string, newText: string): Step => ({
  id,
  tool: "repo.patch",
  args: { path, edits: [{ oldText, newText }] },
});

export async function startPauseRestore(): Promise<PauseRestore> {
  const dir = mkdtempSync(join(tmpdir(), "agentd-restore-"));
  const log: FileEventLog = await openFileEventLog({ dir: join(dir, "log") });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  let script: StubReply[] = [];
  const stub: OpenAiStub = await startOpenAiStub(
    () => script.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } },
  );
  const t = await testSandbox();
  const sandbox: Sandbox = t.sandbox;

  async function run(opts: {
    image: string;
    files: readonly WorkspaceFile[];
    before: readonly Step[];
    after: readonly Step[];
    network?: PresetName;
  }): Promise<Map<string, StepResult>> {
    const policy = await restorePolicy(opts.image, opts.network);
    const ws = await artifacts.put(await packWorkspace(opts.files));
    const r = await queueRun(log, {
      prompt: "change the code, wait for a person, then build and test",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
    });
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    const calls = (steps: readonly Step[]) => steps.map((s) => callReply(s.id, s.tool, s.args));
    script = [...calls(opts.before), callReply("pause", "process.run", { command: "rm -f x" })];
    const first = await driveRun(deps, r.runId, await log.bumpEpoch(r.runId), signal());
    const events = async () => (await log.read(r.runId, 0)).map((e) => e.event.payload);
    assert.equal(first, "paused", lastEvents(await events()));
    const paused = await events();
    assert.ok(
      paused.some((p) => p.case === "artifactEmitted" && p.value.name === "workspace-snapshot"),
      "the pause stored a workspace snapshot",
    );
    assert.equal(await sandbox.find(r.runId), undefined, "the paused run's container is gone");
    const asked = paused.find((p) => p.case === "approvalRequested");
    assert.ok(asked?.case === "approvalRequested");
    await approveInLog(log, r, asked.value.approvalId);
    script = [...calls(opts.after), sayReply("done")];
    const second = await driveRun(deps, r.runId, await log.bumpEpoch(r.runId), signal());
    const all = await events();
    assert.equal(second, "completed", lastEvents(all));
    assert.ok(all.some((p) => p.case === "runResumed"));
    return resultsOf(all);
  }

  return {
    run,
    async close() {
      await t.cleanup();
      await stub.close();
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The test policy on `image` with room for compilers, asking a person only for high-risk
 * commands (the `rm` that pauses the run): inline code and edited build files run freely.
 */
async function restorePolicy(image: string, preset?: PresetName): Promise<Policy> {
  const p = testImagePolicy();
  const sandbox = { ...p.sandbox, image, memory: 1024 << 20, pids: 256 };
  return {
    ...p,
    // With a registry: room in /cache and /tmp for the dependencies the setup installs, and
    // the network it needs (corpus.ts: the addresses a mirror resolves to on this machine).
    ...(preset === undefined
      ? { sandbox }
      : {
          sandbox: { ...sandbox, network: "allowlist", cacheSize: 256 << 20, tmp: 256 << 20 },
          network: { ...p.network, presets: [preset], private: await nonPublicAddresses([preset]) },
        }),
    risk: {
      ...p.risk,
      approvalWhen: {
        highRiskCommand: true,
        dynamicShell: false,
        runWrittenScript: false,
        touchesSecrets: false,
        touchesConfig: false,
        touchesBuild: false,
        impactAtLeast: "never",
      },
    },
  };
}

type Payload = Awaited<ReturnType<FileEventLog["read"]>>[number]["event"]["payload"];

function resultsOf(payloads: readonly Payload[]): Map<string, StepResult> {
  const out = new Map<string, StepResult>();
  for (const p of payloads) {
    if (p.case !== "toolResult") continue;
    const doc = p.value.outputJson === "" ? {} : JSON.parse(p.value.outputJson);
    const res = (doc.result ?? doc) as Omit<StepResult, "ok" | "error">;
    out.set(p.value.callId, { ok: p.value.ok, error: p.value.error?.message ?? "", ...res });
  }
  return out;
}

/** The run's last events, for a failure message. */
function lastEvents(payloads: readonly Payload[]): string {
  return JSON.stringify(
    payloads.slice(-4).map((p) => ({ case: p.case, value: p.value })),
    (_, v) => (typeof v === "bigint" ? String(v) : v),
  );
}

function signal(): AbortSignal {
  return new AbortController().signal;
}
