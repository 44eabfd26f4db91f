/**
 * Directory extended attributes and secret containment, in a real container of agentd's
 * Python image (python3 can set them; the base and test images have no setfattr, and no
 * shell builtin can). A directory's digest (writable-scan.ts) covers its mode and owner,
 * not its `user.*` extended attributes, and the scan cannot read them (busybox and the
 * images' coreutils have no getfattr). This test shows where that leaves a value:
 *
 *   - the sandbox's file systems hold them: tmpfs /workspace, /tmp and /dev/shm keep a
 *     `user.*` attribute on a directory (Linux 6.6 and later);
 *   - setting one takes a program, so an exec: an exec that carried a secret holds the
 *     container, and every later exec (the only calls that can read an attribute) waits
 *     for a person (secret.containment) — whether or not the scan saw the directory change;
 *   - repo.read and repo.search never read attributes, and the workspace snapshot a pause
 *     leaves holds none (the archive is re-packed without them).
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { snapshotWorkspace } from "../worker/workspace-snapshot.ts";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { createRunSecrets } from "./run-secrets.ts";
import { CONTAINMENT_RULE } from "./secret-containment.ts";
import { CONTAINER_STATE } from "./secret-taint.ts";
import { createEnvSecretProvider } from "./secrets.ts";

const SECRET = "xattrSecret-Value-86420-Wv";
const REVERSED = [...SECRET].reverse().join("");

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
// process.run without a person: only containment can make the reading exec wait.
const policy: Policy = {
  ...parsed.policy,
  capabilities: {
    ...parsed.policy.capabilities,
    "process.run": { ...parsed.policy.capabilities["process.run"], approval: "never" },
  },
  secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
  approvals: { expireAfter: 60 * 60_000 },
};

let stack: Stack;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let kernel: Kernel;
let n = 0;

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  kernel = createKernel({
    log: stack.log,
    policy: () => policy,
    secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
  });
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
});

async function freshRun(): Promise<{ run: KernelRun; box: SandboxHandle }> {
  const created = await stack.client.createRun({ prompt: "xattr", labels: { repo: "acme-app" } });
  const runId = created.run?.runId as string;
  const sessionId = created.run?.sessionId as string;
  const box = await sandbox.create({
    runId,
    tenantId: "acme",
    image: sandboxImage("python"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "xd", type: "directory", mode: 0o755 },
      { path: "xd/readme.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
    ]),
  });
  const fence = await stack.log.bumpEpoch(runId);
  await stack.log.append({
    runId,
    sessionId,
    fence,
    payload: {
      case: "runStarted",
      value: create(RunStartedSchema, { workerId: "test", epoch: BigInt(fence) }),
    },
  });
  return { run: { runId, sessionId, fence, sandbox: box, taint: new Map() }, box };
}

const approved = async (run: KernelRun, tool: string, input: unknown): Promise<CallOutcome> => {
  const call = { callId: `x${++n}`, tool, input };
  const first = await kernel.handle(run, call);
  if (first.kind !== "paused") return first;
  return kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
};

const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;

const SET = (dir: string, value: string) =>
  `python3 -c "import os; os.setxattr('${dir}', 'user.k', b'${value}'[::-1])"`;
const GET = (dir: string) =>
  `python3 -c "import os; print(os.getxattr('${dir}', 'user.k').decode())"`;

describe("a directory's extended attributes and a secret", () => {
  it("the sandbox's tmpfs mounts keep a user.* attribute on a directory (the gap is reachable)", async () => {
    const { box } = await freshRun();
    for (const dir of ["/workspace/xd", "/tmp/xd", "/dev/shm/xd"]) {
      const r = await box.exec({
        argv: ["sh", "-c", `mkdir -p ${dir} && ${SET(dir, "plain")} && ${GET(dir)}`],
        timeoutMs: 60_000,
        maxOutputBytes: 4096,
      });
      assert.equal(r.exitCode, 0, `${dir}: ${r.stderr}`);
      assert.equal(r.stdout.trim(), "nialp", dir);
    }
  });

  it("a secret set as a directory attribute by an approved exec is read back only by a call a person approves; no artifact carries it", async () => {
    const { run, box } = await freshRun();
    const w = await approved(run, "process.run", {
      command: SET("/workspace/xd", "$ENV.DEMO_TOKEN"),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // The scan does not see the attribute: the directory is not held …
    assert.equal(run.taint?.has("/workspace/xd"), false, [...(run.taint?.keys() ?? [])].join());
    // … but the exec held the container: every later exec waits for a person.
    assert.ok(run.taint?.has(CONTAINER_STATE));
    const read = await kernel.handle(run, {
      callId: `x${++n}`,
      tool: "process.run",
      input: { command: GET("/workspace/xd") },
    });
    assert.equal(read.kind, "paused", JSON.stringify(read));
    const decided = (await stack.log.read(run.runId, 0))
      .map((e) => e.event.payload)
      .filter((p) => p.case === "policyDecision")
      .at(-1);
    assert.equal(decided?.case === "policyDecision" && decided.value.rule, CONTAINMENT_RULE);
    // repo.* read no attributes: they run without a person and show none.
    const listed = await kernel.handle(run, {
      callId: `x${++n}`,
      tool: "repo.read",
      input: { path: "xd/readme.txt" },
    });
    assert.equal(listed.kind, "result");
    assert.equal(JSON.stringify(listed).includes(REVERSED), false);
    // The attribute is really there (a person's view of the sandbox).
    const there = await box.exec({
      argv: ["sh", "-c", GET("/workspace/xd")],
      timeoutMs: 60_000,
      maxOutputBytes: 4096,
    });
    assert.equal(there.stdout.trim(), REVERSED, "the attribute holds the value");
    // The snapshot a pause would leave carries no attribute.
    const dir = mkdtempSync(join(tmpdir(), "agentd-xattr-snap-"));
    try {
      const store = new FsArtifactStore(dir);
      const info = await snapshotWorkspace(store, box, createRunSecrets([SECRET]));
      const chunks: Buffer[] = [];
      for await (const c of store.read(info.digest)) chunks.push(Buffer.from(c));
      const tar = Buffer.concat(chunks).toString("latin1");
      assert.ok(tar.includes("xd/readme.txt"), "the directory's files are in the snapshot");
      assert.equal(tar.includes(REVERSED), false, "no attribute value in the snapshot");
      assert.equal(tar.includes("user.k"), false, "no attribute name either");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
