/**
 * Secret containment by mechanism, against the real kernel, a real Docker sandbox and a
 * real Redis log: after a person approves a call that writes a secret, no later call that
 * could read what it wrote runs without a person, whatever encoding it uses; the taint is
 * in the log (a taker knows it), ends only when a scan finds the file gone, and keeps the
 * file out of the final patch. An exec that carried a secret also holds the container's
 * kernel state: every later exec waits for a person for the rest of the run
 * (secret-containment-kernel-state.test.ts has the attacks).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import type { SandboxHandle } from "../sandbox/port.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import {
  type ContainmentRun,
  containmentKernel,
  containmentRun,
  holds,
  holdsByName,
  SECRET,
} from "../testing/containment-run.ts";
import { testSandbox } from "../testing/docker.ts";
import type { Kernel, KernelRun } from "./kernel.ts";
import { CONTAINMENT_RULE } from "./secret-containment.ts";
import { CONTAINER_STATE, heldFiles, SEALED_SHOWN, taintFromEvents } from "./secret-taint.ts";

let stack: Stack;
let _box: SandboxHandle;
let cleanupBoxes: () => Promise<void>;
let kernel: Kernel;
let run: KernelRun;
let c: ContainmentRun;
let sandboxes: Awaited<ReturnType<typeof testSandbox>>["sandbox"];

/** A call a person approves (handle pauses, then the approval runs it). */
const approved = (tool: string, input: unknown) => c.approved(tool, input);
const unapproved = (tool: string, input: unknown) => c.unapproved(tool, input);
const sh = (command: string) => c.sh(command);

/** Every form of the value a test could look for (a decoder could get the value back from). */
function forms(v: string): string[] {
  const b = Buffer.from(v);
  const half = Math.floor(v.length / 2);
  const everyOther = [...v].filter((_, i) => i % 2 === 0).join("");
  return [
    v,
    b.toString("base64"),
    b.toString("hex"),
    v.slice(0, half),
    v.slice(half),
    everyOther,
    [...v].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join(""),
    gzipSync(b).toString("base64").slice(12, 40),
    [...v].join("   "), // od -c
  ];
}

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  cleanupBoxes = t.cleanup;
  kernel = containmentKernel(stack);
  sandboxes = t.sandbox;
  c = await containmentRun(stack, t.sandbox, kernel, { prompt: "containment test" });
  run = c.run;
  _box = c.box;
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
});

/** The files the run holds a secret in (the container-state entry left out). */
const files = (): string[] => heldFiles(run.taint ?? new Map());
/** The run's held paths, the container's state left out (what a scan can end). */
const clearHeld = (): string[] =>
  [...(run.taint?.keys() ?? [])].filter((p) => p !== CONTAINER_STATE);

const logText = async () =>
  (await stack.log.read(run.runId, 0)).map((e) => JSON.stringify(e.json)).join("\n");

describe("secret containment", () => {
  it("a secret exec that writes nothing holds no file but the container: a later exec waits, a repo.read does not", async () => {
    const own = await containmentRun(stack, sandboxes, kernel, { prompt: "writes nothing" });
    const r = await own.approved("process.run", { command: 'test -n "$ENV.DEMO_TOKEN"' });
    assert.equal(r.kind === "result" && r.ok, true, JSON.stringify(r));
    assert.deepEqual([...(own.run.taint?.keys() ?? [])], [CONTAINER_STATE]);
    const later = await own.unapproved("process.run", { command: "echo hi" });
    assert.equal(later.kind, "paused", JSON.stringify(later));
    if (later.kind === "paused") {
      assert.deepEqual(later.preview.secretFiles, [...SEALED_SHOWN]);
      assert.match(later.preview.summary, /kernel state \(process and inode counters\)/);
    }
    const read = await own.unapproved("repo.read", { path: "hello.txt" });
    assert.equal(read.kind, "result", JSON.stringify(read));
  });

  it("after an approved call writes the secret, every re-encoding asks a person and the preview names the file", async () => {
    const w = await approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" > tok.txt',
    });
    assert.equal(w.kind === "result" && w.ok, true, JSON.stringify(w));
    // tok.txt is a path the secret call wrote: held by its keyed hash, never shown or counted.
    assert.deepEqual(files(), [...SEALED_SHOWN]);
    assert.equal(holdsByName(run, "/workspace/tok.txt"), true);
    const encodings = [
      "base32 tok.txt",
      "gzip -c tok.txt | base64",
      "od -c tok.txt",
      "fold -w 3 tok.txt",
      "head -c 14 tok.txt",
      "tail -c 15 tok.txt",
      "awk '{ for (i = 1; i <= length($0); i += 2) printf \"%s\", substr($0, i, 1) }' tok.txt",
      'node -e \'process.stdout.write(JSON.stringify(require("fs").readFileSync("tok.txt","utf8")).replace(/./g,c=>"\\\\u"+c.charCodeAt(0).toString(16).padStart(4,"0")))\'',
      "openssl enc -aes-256-cbc -pbkdf2 -k modelkey -in tok.txt | base64",
      "awk 'BEGIN{k=7}{for(i=1;i<=length($0);i++)printf \"%d,\", xor(ord,k)}' tok.txt",
      "cp tok.txt /tmp/copy",
    ];
    for (const command of encodings) {
      const r = await unapproved("process.run", { command });
      assert.equal(r.kind, "paused", `${command}: ${JSON.stringify(r)}`);
      if (r.kind !== "paused") continue;
      assert.deepEqual(r.preview.secretFiles, [...SEALED_SHOWN], command);
      assert.match(
        r.preview.summary,
        /paths in \/workspace, \/tmp, \/cache, \/dev\/shm and elsewhere \(which, where and how many: held\)/,
      );
    }
    for (const [tool, input] of [
      ["repo.read", { path: "tok.txt" }],
      ["repo.read", { path: "hello.txt" }],
      ["repo.search", { query: "tok" }],
      ["test.run", {}],
      ["lint.run", {}],
    ] as const) {
      const r = await unapproved(tool, input);
      assert.equal(r.kind, "paused", `${tool}: ${JSON.stringify(r)}`);
    }
    const text = await logText();
    for (const f of forms(SECRET)) assert.equal(text.includes(f), false, `log holds ${f}`);
    assert.match(text, new RegExp(CONTAINMENT_RULE.replace(".", "\\.")));
    // The forms are real: the same command, approved, does give the encoding back.
    const shown = await approved("process.run", { command: "od -c tok.txt" });
    assert.equal(shown.kind, "result");
    assert.match(JSON.stringify(shown), /t {3}o {3}k {3}3/);
  });

  it("the taint is in the log: a drive that takes the run over derives it", async () => {
    const events = (await stack.log.read(run.runId, 0)).map((e) => e.event);
    const derived = taintFromEvents(events);
    // Every root's records (padding ends at the next scan), and the container.
    assert.equal(derived.has(CONTAINER_STATE), true);
    assert.equal(holds({ ...run, taint: derived }, "/workspace/tok.txt"), true);
    const taker: KernelRun = { ...run, taint: derived };
    const r = await kernel.handle(taker, {
      callId: "taker-1",
      tool: "process.run",
      input: { command: "base32 tok.txt" },
    });
    assert.equal(r.kind, "paused", JSON.stringify(r));
  });

  it("a secret written to /tmp taints /tmp's file; deleting the files ends the taints (by a scan)", async () => {
    const w = await approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" | rev > /tmp/rev.txt && rm -f tok.txt',
    });
    assert.equal(w.kind === "result" && w.ok, true, JSON.stringify(w));
    const held = files().sort();
    assert.equal(held.includes("/tmp/… (names held)"), true, JSON.stringify(held));
    assert.equal(holdsByName(run, "/tmp/rev.txt"), true);
    const r = await unapproved("process.run", { command: "rev /tmp/rev.txt" });
    assert.equal(
      r.kind === "paused" && r.preview.secretFiles?.includes("/tmp/… (names held)"),
      true,
      JSON.stringify(r).slice(0, 600),
    );
    // Removed outside any call (a person at the container): the next scan ends the files'
    // taints, never the container's (the exec still waits, its preview names no file).
    await sh("rm -f /tmp/rev.txt /tmp/copy /workspace/tok.txt");
    const still = await unapproved("process.run", { command: "echo free" });
    assert.deepEqual(still.kind === "paused" && still.preview.secretFiles, [...SEALED_SHOWN]);
    assert.deepEqual(clearHeld(), []);
    assert.equal(run.taint?.has(CONTAINER_STATE), true);
  });

  it("an entry left in the unlistable HOME directory is tainted (the agent lists it)", async () => {
    const w = await approved("process.run", {
      command:
        'mkdir -p /tmp/.agentd-home/stash && printf %s "$ENV.DEMO_TOKEN" > /tmp/.agentd-home/stash/t',
    });
    assert.equal(w.kind === "result" && w.ok, true, JSON.stringify(w));
    assert.equal(holdsByName(run, "/tmp/.agentd-home/stash/t"), true, JSON.stringify(files()));
    const r = await unapproved("process.run", { command: "base32 /tmp/.agentd-home/stash/t" });
    assert.equal(
      r.kind === "paused" && r.preview.secretFiles?.includes("/tmp/… (names held)"),
      true,
      JSON.stringify(r).slice(0, 600),
    );
    // Removing the entry ends the files' taints (by a scan); the container stays held.
    await sh("rm -rf /tmp/.agentd-home/stash");
    const still = await unapproved("process.run", { command: "echo free" });
    assert.deepEqual(still.kind === "paused" && still.preview.secretFiles, [...SEALED_SHOWN]);
    assert.deepEqual(clearHeld(), []);
  });

  it("the model's word does not end a taint: a file changed again stays tainted", async () => {
    const w = await approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" > again.txt',
    });
    assert.equal(w.kind === "result" && w.ok, true);
    await sh("echo overwritten > /workspace/again.txt");
    const r = await unapproved("process.run", { command: "cat again.txt" });
    assert.equal(r.kind, "paused", JSON.stringify(r));
    // A repo.read (which no kernel counter reaches) asks too: the file is still held.
    const read = await unapproved("repo.read", { path: "again.txt" });
    assert.equal(
      read.kind === "paused" &&
        (read.preview.secretFiles ?? []).some((p) => /^\/workspace\/… \(names held\)$/.test(p)),
      true,
      JSON.stringify(read),
    );
  });
});
