/**
 * The kernel sees through globs, emptying forms and the lint command's scripts, end to end:
 * the default policy, a real container (the base image, which has npm) and the embedded
 * event log. `cp p.txt packag?.json`, `: > notes.txt`, `cp /tmp/e notes.txt` (an empty file
 * an earlier call made) and `mv b.txt notes.txt` wait for a person and change nothing; lint.run (approval: never) runs the uploaded package.json's lint script without
 * asking, and asks once the run has changed that script.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import { indexWorkspace } from "./script-probe.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = { ...parsed.policy, tools: { lint: "npm run lint" } };

const PACKAGE = '{"name":"w","version":"1.0.0","scripts":{"lint":"echo linted"}}\n';
const HOSTILE = '{"name":"w","version":"1.0.0","scripts":{"lint":"touch pwned"}}\n';
const FILES: WorkspaceFile[] = [
  { path: "package.json", type: "file", mode: 0o644, data: Buffer.from(PACKAGE) },
  { path: "p.txt", type: "file", mode: 0o644, data: Buffer.from(HOSTILE) },
  { path: "notes.txt", type: "file", mode: 0o644, data: Buffer.from("keep me\n") },
];

let dir: string;
let log: FileEventLog;
let box: SandboxHandle;
let cleanup: () => Promise<void>;
let run: KernelRun;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-globs-"));
  log = await openFileEventLog({ dir });
  const t = await testSandbox();
  cleanup = t.cleanup;
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("base"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace(FILES),
  });
  const q = await queueRun(log, { prompt: "p" });
  run = {
    ...q,
    fence: await log.bumpEpoch(q.runId),
    sandbox: box,
    baseIndex: async () => indexWorkspace(FILES),
  };
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sh = async (cmd: string): Promise<string> =>
  (await box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 30_000, maxOutputBytes: 4096 })).stdout;

async function lastDecision(): Promise<{ rule: string; reason: string }> {
  const decisions = (await log.read(run.runId, 0)).flatMap((e) =>
    e.event.payload.case === "policyDecision" ? [e.event.payload.value] : [],
  );
  const d = decisions.at(-1);
  assert.ok(d, "a decision was recorded");
  return { rule: d.rule, reason: d.reason };
}

/** Forms of changing package.json or emptying notes.txt (a review's and the author's own). */
const BATTERY = [
  "cp p.txt ./*.json",
  "cp p.txt package.js[o]n",
  "cp p.txt \"pack\"'age.json'",
  "cp p.txt pack\\age.json",
  "f=package.json; cp p.txt $f",
  "cp p.txt $(printf package.json)",
  "cp p.txt `printf package.json`",
  "cat p.txt 1<>package.json",
  "cat p.txt >| package.json",
  "exec 3>package.json; cat p.txt >&3",
  "sed -n 'w package.json' p.txt",
  "awk '{print > \"package.json\"}' p.txt",
  "find . -name p.txt -exec cp {} package.json \\;",
  "echo package.json | xargs cp p.txt",
  "install -m644 p.txt package.json",
  "ln -f p.txt package.json",
  "node -e \"require('fs').copyFileSync('p.txt','package.json')\"",
  "cp p.txt /workspace/package.json",
  "cd /tmp && cp /workspace/p.txt /workspace/package.json",
  "mv p.txt packa*",
  "ln -sf p.txt packag?.json",
  "tar cf /tmp/t.tar p.txt --transform s/p.txt/package.json/ && tar xf /tmp/t.tar",
  "diff -u package.json p.txt > /tmp/d.diff; patch package.json < /tmp/d.diff",
  "sed -i 's/echo linted/touch pwned/' package.json",
  "perl -pi -e 's/echo linted/touch pwned/' package.json",
  "split -n1 p.txt /tmp/s && cp /tmp/saa package.json",
  "cp -f p.txt package.json",
  "cp p.txt package.json~ && mv -T package.json~ package.json",
  // Emptying notes.txt.
  "sort -o notes.txt /dev/null",
  "sort -uo notes.txt /dev/null",
  "sort --output=notes.txt < /dev/null",
  "uniq /dev/null notes.txt",
  "shuf -n0 -o notes.txt notes.txt",
  "shuf -e -o notes.txt",
  "iconv -f utf-8 -t utf-8 -o notes.txt /dev/null",
  "xxd -r /dev/null notes.txt",
  "cp /dev/null notes.txt",
  "cp --remove-destination /dev/null notes.txt",
  "install /dev/null notes.txt",
  "rsync /dev/null notes.txt",
  "node -e \"require('fs').writeFileSync('notes.txt','')\"",
  "head -c0 notes.txt > /tmp/z; cp /tmp/z notes.txt",
  ": > e; cp e notes.txt",
  "touch e && mv e notes.txt",
  "touch e && cp e notes.txt",
  "printf '' | dd of=notes.txt status=none",
  "> notes.txt",
  ": > notes.txt",
  "{ true; } > notes.txt",
  "awk 'BEGIN{}' > notes.txt",
  "diff /dev/null /dev/null > notes.txt",
  "comm /dev/null /dev/null > notes.txt",
  "xargs -a /dev/null > notes.txt",
  "sed -i d notes.txt",
  "perl -i -ne 'print if /nothing/' notes.txt",
  "printf ',d\\nw\\n' | ed -s notes.txt",
  "ln -sf /dev/null notes.txt",
  "tee notes.txt </dev/null",
  "cat /dev/null | tee notes.txt",
  "truncate -s0 notes.txt",
  "cat notes.txt | grep -v keep | sponge notes.txt",
  "cp notes.txt /tmp/n && grep -v keep /tmp/n > notes.txt",
  "grep -v keep notes.txt > /tmp/n; cat /tmp/n > notes.txt",
];

describe("globs, emptying forms and lint.run's scripts, with a real sandbox", () => {
  it("cp p.txt packag?.json waits for a person and leaves package.json alone", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const out = await kernel.handle(run, {
      callId: "g1",
      tool: "process.run",
      input: { command: "cp p.txt packag?.json" },
    });
    assert.equal(out.kind, "paused", JSON.stringify(out));
    assert.match((await lastDecision()).reason, /touchesBuild/);
    assert.equal(await sh("cat package.json"), PACKAGE, "the glob did not run");
  });

  it(": > notes.txt waits for a person and the file keeps its content", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const out = await kernel.handle(run, {
      callId: "g2",
      tool: "process.run",
      input: { command: ": > notes.txt" },
    });
    assert.equal(out.kind, "paused", JSON.stringify(out));
    assert.match((await lastDecision()).reason, /empties the file/);
    assert.equal(await sh("cat notes.txt"), "keep me\n");
    const ordinary = await kernel.handle(run, {
      callId: "g3",
      tool: "process.run",
      input: { command: "echo hi > out.txt && cat out.txt" },
    });
    assert.equal(ordinary.kind, "result", "writing content into a new file runs");
  });

  it("copying an empty file over one, or moving onto an existing one, waits for a person", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const call = async (callId: string, command: string) =>
      kernel.handle(run, { callId, tool: "process.run", input: { command } });
    assert.equal((await call("r1", "touch /tmp/e && echo x > a.txt")).kind, "result");
    const copy = await call("r2", "cp /tmp/e notes.txt");
    assert.equal(copy.kind, "paused", JSON.stringify(copy));
    assert.match((await lastDecision()).reason, /copies \/tmp\/e, which is empty/);
    const missing = await call("r3", "cat missing.txt > notes.txt");
    assert.equal(missing.kind, "paused", "the shell would empty notes.txt before cat fails");
    assert.equal((await call("r4", "mv a.txt b.txt")).kind, "result", "a rename runs");
    const onto = await call("r5", "mv b.txt notes.txt");
    assert.equal(onto.kind, "paused", JSON.stringify(onto));
    assert.match((await lastDecision()).reason, /mv b\.txt onto notes\.txt \(replaces/);
    assert.equal(await sh("cat notes.txt; ls b.txt"), "keep me\nb.txt\n", "nothing ran");
    assert.equal(
      (await call("r6", "cp notes.txt copy.txt && cat a.txt b.txt > c.txt")).kind,
      "result",
    );
  });

  it("lint.run runs the uploaded lint script, and asks once the run changed it", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const own = await kernel.handle(run, { callId: "l1", tool: "lint.run", input: {} });
    assert.equal(own.kind, "result", JSON.stringify(own));
    assert.equal(own.kind === "result" && own.ok, true, JSON.stringify(own));
    assert.match(JSON.stringify(own), /linted/);
    // The model's edit of the lint script (a patch a person approved, or any other write):
    // what lint.run would now execute is the run's own code.
    await sh(`cp p.txt package.json`);
    const written = await kernel.handle(run, { callId: "l2", tool: "lint.run", input: {} });
    assert.equal(written.kind, "paused", "lint.run waits for a person");
    const d = await lastDecision();
    assert.equal(d.rule, "risk.approvalWhen.runWrittenScript");
    assert.match(d.reason, /provenance:run-written:package\.json/);
    assert.equal(await sh("ls pwned 2>/dev/null; true"), "", "and the model's script did not run");
  });
  it("every form that changes package.json or empties notes.txt waits for a person", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const changed: string[] = [];
    let i = 0;
    for (const command of BATTERY) {
      await sh(
        `rm -rf package.json notes.txt e; printf %s '${PACKAGE}' > package.json; printf %s '${HOSTILE}' > p.txt; printf 'keep me\\n' > notes.txt`,
      );
      const callId = `b${++i}`;
      const out = await kernel.handle(run, { callId, tool: "process.run", input: { command } });
      const pkg = await sh("cat package.json");
      const notes = await sh("cat notes.txt");
      if (out.kind !== "paused" && (pkg !== PACKAGE || notes !== "keep me\n"))
        changed.push(
          `${command} -> package.json ${pkg === PACKAGE ? "same" : "changed"}, notes ${JSON.stringify(notes)}`,
        );
    }
    assert.deepEqual(changed, []);
  });
});
