/**
 * Attack: an applied family rule runs a build script the run wrote outside the workspace.
 *
 * An admin applied `cargo build`@web (a person approved `cargo build` with --rule command).
 * The run writes /tmp/x/Cargo.toml and /tmp/x/build.rs (an earlier call: /tmp is the run's
 * own), then proposes `cargo build --manifest-path /tmp/x/Cargo.toml`: cargo compiles and
 * runs /tmp/x/build.rs — code the run wrote, that no person saw.
 *
 * Why it gets through: risk.ts gives the line the workspace's build files as its scripts
 * (Cargo.toml, build.rs, .cargo/config*), not the manifest the line names, so the
 * provenance probe (kernel.ts withProvenance) finds nothing the run wrote and the
 * runWrittenScript fact is absent; the facts left (touchesBuild, touchesConfig) are ones a
 * family answers for (approved-commands.ts RELAXABLE), and the line is one plain command
 * starting with `cargo build`, so approvedCommandRule() makes it `preview+auto`. (Without
 * the rule it asks, for touchesBuild; `make -C /tmp/x` and `npm --prefix /tmp/x` are called
 * dynamic — "runs files outside the workspace" — but `--manifest-path` is not.)
 *
 * What must hold (docs/policy.md "approvedCommands"): a family rule never relaxes a call
 * that runs a file the run wrote or changed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel } from "./kernel.ts";
import { readPolicyFile } from "./policy-loader.ts";
import { indexWorkspace } from "./script-probe.ts";

const ROOT = join(import.meta.dirname, "..", "..");
let dir = "";
let log: FileEventLog;
let sandbox: Sandbox;
let cleanup: (() => Promise<void>) | undefined;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-outside-"));
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

describe("attack3: a family rule and a manifest outside the workspace", () => {
  it("cargo build --manifest-path /tmp/x/Cargo.toml (run-written build.rs) asks a person", async () => {
    const file = join(dir, "policy.yaml");
    writeFileSync(
      file,
      [
        "version: 1",
        `extends: ${join(ROOT, "policy.yaml")}`,
        "approvedCommands:",
        "  - command: cargo build",
        "    repo: web",
      ].join("\n"),
    );
    const r = readPolicyFile(file);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const policy = r.policy;
    const files = [
      {
        path: "Cargo.toml",
        type: "file" as const,
        mode: 0o644,
        data: Buffer.from('[package]\nname = "app"\nversion = "0.1.0"\n'),
      },
      {
        path: "src/main.rs",
        type: "file" as const,
        mode: 0o644,
        data: Buffer.from("fn main(){}\n"),
      },
    ];
    const q = await queueRun(log, { prompt: "p" });
    const box = await sandbox.create({
      runId: q.runId,
      tenantId: "t",
      image: sandboxImage("test"),
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: await packWorkspace(files),
    });
    // What an earlier call of the run wrote (its own /tmp): a crate whose build script runs.
    const wrote = await box.exec({
      argv: [
        "sh",
        "-c",
        'mkdir -p /tmp/x/src && printf \'[package]\\nname = "x"\\nversion = "0.1.0"\\nbuild = "build.rs"\\n\' > /tmp/x/Cargo.toml && echo \'fn main(){ std::fs::write("/workspace/pwned", "x").unwrap(); }\' > /tmp/x/build.rs && echo \'fn main(){}\' > /tmp/x/src/main.rs',
      ],
      cwd: "/workspace",
      timeoutMs: 60_000,
      maxOutputBytes: 4096,
    });
    assert.equal(wrote.exitCode, 0, wrote.stderr);
    const run = {
      ...q,
      fence: await log.bumpEpoch(q.runId),
      sandbox: box,
      repo: "web",
      baseIndex: async () => indexWorkspace(files),
      pristine: false,
    };
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "cargo build --manifest-path /tmp/x/Cargo.toml" },
    });
    const d = (await log.read(q.runId, 0))
      .map((e) => e.event.payload)
      .find((p) => p.case === "policyDecision");
    assert.ok(d?.case === "policyDecision");
    assert.equal(
      d.value.decision,
      Decision.PREVIEW_APPROVAL,
      `decided ${Decision[d.value.decision]} by ${d.value.rule}: a run-written build script would run unseen`,
    );
  });
});
