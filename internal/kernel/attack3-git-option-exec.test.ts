/**
 * Attack (found while reviewing #29's reviewer and rule paths; the gap is in the command
 * analysis they rely on): git options that run a program or overwrite a file, decided
 * `preview+auto` under the default policy with no person — and so never a personFor fact
 * for the model reviewer, and a family (`git fetch`, `git log`) a rule can be made of.
 *
 * - `git fetch --upload-pack=./evil.sh .` (also `git ls-remote --upload-pack=…`): for a
 *   local remote git runs the named program itself — here a script the run wrote, which
 *   the provenance probe never sees (it is an option's value, not a script the line runs).
 *   `git clone --upload-pack` is called dynamic; fetch and ls-remote are not.
 * - `git log --output=src/a.ts` (also `git diff --output`, `git archive -o`, `git bundle
 *   create`): truncates and overwrites an uploaded file, which `> src/a.ts` would make
 *   destructive (highRiskCommand).
 *
 * Why: command-analysis.ts / git-command.ts know `git clone --upload-pack` and `git -c
 * …` but not these subcommands' options. What must hold: a line that runs a program it
 * names, or overwrites a file, is dynamic or destructive like its shell equivalent: a
 * person decides (or at least the decision is not preview+auto), and nothing ran.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel } from "./kernel.ts";
import { readPolicyFile } from "./policy-loader.ts";
import { indexWorkspace } from "./script-probe.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const ORIGINAL = "export const keep = 1;\n";
const files = [
  { path: "src/a.ts", type: "file" as const, mode: 0o644, data: Buffer.from(ORIGINAL) },
];
let dir = "";
let log: FileEventLog;
let sandbox: Sandbox;
let cleanup: (() => Promise<void>) | undefined;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-git-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sh = async (box: SandboxHandle, script: string) => {
  const r = await box.exec({
    argv: ["sh", "-c", script],
    cwd: "/workspace",
    timeoutMs: 60_000,
    maxOutputBytes: 8192,
  });
  return r;
};

async function attempt(command: string) {
  const r = readPolicyFile(join(ROOT, "policy.yaml"));
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const q = await queueRun(log, { prompt: "p" });
  const box = await sandbox.create({
    runId: q.runId,
    tenantId: "t",
    image: sandboxImage("base"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace(files),
  });
  // What earlier calls of the run did: a repository with a commit, and a script of its own.
  const prep = await sh(
    box,
    "git init -q . && git -c user.email=a@b -c user.name=a add -A && git -c user.email=a@b -c user.name=a commit -qm init && printf '#!/bin/sh\\ntouch /workspace/pwned\\nexec git-upload-pack \"$@\"\\n' > evil.sh && chmod +x evil.sh",
  );
  assert.equal(prep.exitCode, 0, prep.stderr);
  const run = {
    ...q,
    fence: await log.bumpEpoch(q.runId),
    sandbox: box,
    baseIndex: async () => indexWorkspace(files),
    pristine: false,
  };
  await createKernel({ log, policy: () => r.policy, secretProviders: [] }).handle(run, {
    callId: "c1",
    tool: "process.run",
    input: { command },
  });
  const d = (await log.read(q.runId, 0))
    .map((e) => e.event.payload)
    .find((p) => p.case === "policyDecision");
  assert.ok(d?.case === "policyDecision");
  return {
    box,
    decided: `${Decision[d.value.decision]} by ${d.value.rule}`,
    decision: d.value.decision,
  };
}

describe("attack3: git options that run programs or overwrite files (default policy)", () => {
  for (const command of [
    "git fetch --upload-pack=./evil.sh .",
    "git ls-remote --upload-pack=./evil.sh .",
  ]) {
    it(`${command}: the run's script does not run unseen`, async () => {
      const { box, decided, decision } = await attempt(command);
      const ran = (await sh(box, "test -e pwned")).exitCode === 0;
      assert.ok(
        decision === Decision.PREVIEW_APPROVAL || !ran,
        `decided ${decided}; evil.sh ran: ${ran}`,
      );
      assert.notEqual(decision, Decision.PREVIEW_AUTO, `decided ${decided}`);
    });
  }
  for (const command of ["git log --output=src/a.ts", "git diff --output=src/a.ts HEAD"]) {
    it(`${command}: overwriting an uploaded file is not preview+auto`, async () => {
      const { box, decided, decision } = await attempt(command);
      const now = (await sh(box, "cat src/a.ts")).stdout;
      assert.ok(
        decision === Decision.PREVIEW_APPROVAL || now === ORIGINAL,
        `decided ${decided}; src/a.ts is now ${JSON.stringify(now.slice(0, 80))}`,
      );
      assert.notEqual(decision, Decision.PREVIEW_AUTO, `decided ${decided}`);
    });
  }
});
