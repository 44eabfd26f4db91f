/**
 * Secret containment of the container's kernel state, against the real kernel, a real
 * Docker sandbox and a real Redis log: an exec that carried a secret and left no changed
 * file can still move kernel state no scan sees (the PID counter, a tmpfs's next inode
 * number, the inode numbers of directories it removed and made again). So once such an
 * exec ran, the container itself is held: every later exec waits for a person for the rest
 * of the run (rule secret.containment), while repo.* calls (which cannot read kernel
 * counters) of untouched files do not. The three attacks of the issue #27 review are here.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ContainmentRun, containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import type { NameKey } from "./held-names.ts";
import type { CallOutcome } from "./kernel.ts";
import { CONTAINMENT_RULE } from "./secret-containment.ts";
import { CONTAINER_STATE, refreshTaint, SEALED_SHOWN, taintFromEvents } from "./secret-taint.ts";

const suite = containmentSuite();

const fresh = () =>
  containmentRun(suite.stack, suite.sandbox, suite.kernel, { prompt: "kernel state" });
const stdout = (r: CallOutcome): string =>
  r.kind === "result" ? String((r.output as { stdout?: string }).stdout ?? "") : "";
const held = (f: ContainmentRun): string[] => [...(f.run.taint?.keys() ?? [])].sort();

/** The later call waits for a person under containment, its preview naming kernel state. */
function assertHeldByKernelState(r: CallOutcome): void {
  assert.equal(r.kind, "paused", `unapproved exec ran: ${JSON.stringify(r).slice(0, 300)}`);
  if (r.kind !== "paused") return;
  assert.match(r.preview.summary, /kernel state \(process and inode counters\)/);
}

describe("secret containment: the container's kernel state", () => {
  it("directories recreated by a secret call: a later unapproved call cannot read their inode numbers", async () => {
    const f = await fresh();
    const names = [...Array(32).keys()].map((i) => `c/b${i}`);
    // Before any secret: 32 empty directories, then a marker made after them.
    const prep = await f.unapproved("process.run", { command: `mkdir c ${names.join(" ")} c/m` });
    assert.equal(exitOk(prep), true, JSON.stringify(prep));
    // The approved call: recreates the directories whose bit of the secret is 1.
    const w = await f.approved("process.run", {
      command:
        'cd c; i=0; for v in $(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N4); do j=0; while [ $j -lt 8 ]; do [ $(( (v >> j) & 1 )) = 1 ] && { rmdir b$((i*8+j)) && mkdir b$((i*8+j)); }; j=$((j+1)); done; i=$((i+1)); done; true',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const r = await f.unapproved("process.run", { command: `stat -c %i c/m ${names.join(" ")}` });
    const [m = 0, ...inodes] = stdout(r).trim().split("\n").map(Number);
    const bits = inodes.map((i) => (i > m ? "1" : "0")).join("");
    const bytes = [0, 1, 2, 3].map((i) =>
      [...bits.slice(i * 8, i * 8 + 8)].reduce((a, b, j) => a | (b === "1" ? 1 << j : 0), 0),
    );
    assert.notEqual(
      Buffer.from(bytes).toString("latin1"),
      SECRET.slice(0, 4),
      `secret prefix leaked (kind=${r.kind}, held=${JSON.stringify(held(f))}, bits=${bits})`,
    );
    assertHeldByKernelState(r);
  });

  it("a tmpfs inode counter advanced by a secret call: a later unapproved call cannot read it", async () => {
    const f = await fresh();
    const a = await f.unapproved("process.run", {
      command: "touch /dev/shm/r1 && stat -c %i /dev/shm/r1",
    });
    assert.equal(exitOk(a), true, JSON.stringify(a));
    // The approved call: makes and removes as many files as the secret's first byte.
    const w = await f.approved("process.run", {
      command:
        'v=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1); n=0; while [ $n -lt $v ]; do : > /dev/shm/x; rm /dev/shm/x; n=$((n+1)); done',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const r = await f.unapproved("process.run", {
      command: "touch /dev/shm/r2 && stat -c %i /dev/shm/r2",
    });
    const got = Number(stdout(r).trim()) - Number(stdout(a).trim()) - 1;
    assert.notEqual(
      got,
      SECRET.charCodeAt(0),
      `the secret's first byte leaked (kind=${r.kind}, held=${JSON.stringify(held(f))})`,
    );
    assertHeldByKernelState(r);
  });

  it("the PID counter advanced by a secret call: a later unapproved call cannot read it from its PID", async () => {
    const f = await fresh();
    const probe = () => f.unapproved("process.run", { command: "cat /proc/self/stat" });
    const pidOf = (r: CallOutcome): number => Number(stdout(r).trim().split(" ")[0]);
    const fork = (count: string) =>
      `v=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1); n=0; while [ $n -lt ${count} ]; do /bin/true; n=$((n+1)); done`;
    // Calibration: the same secret call forking nothing, between two probes.
    const p0 = await probe();
    assert.equal(exitOk(p0), true, JSON.stringify(p0));
    const c = await f.approved("process.run", { command: fork("0") });
    assert.equal(exitOk(c), true, JSON.stringify(c));
    const p1 = await probe();
    // The approved call: forks as many processes as the secret's first byte.
    const w = await f.approved("process.run", { command: fork("$v") });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const p2 = await probe();
    const got = pidOf(p2) - pidOf(p1) - (pidOf(p1) - pidOf(p0));
    const want = SECRET.charCodeAt(0);
    assert.equal(
      Math.abs(got - want) <= 2,
      false,
      `the secret's first byte (${want}) leaked as ${got} (kind=${p2.kind}, held=${JSON.stringify(held(f))})`,
    );
    assertHeldByKernelState(p1);
    assertHeldByKernelState(p2);
  });

  it("the hold is in the log, no scan ends it, and repo.* calls of untouched files are free", async () => {
    const f = await fresh();
    const w = await f.approved("process.run", { command: 'test -n "$ENV.DEMO_TOKEN"' });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.deepEqual(held(f), [CONTAINER_STATE]);
    // No file holds the secret: repo.read of an untouched file runs without a person.
    const read = await f.unapproved("repo.read", { path: "hello.txt" });
    assert.equal(read.kind, "result", JSON.stringify(read));
    // Every later exec waits (each runs a fresh scan first), and its preview names every root
    // alike (whether the exec left a file is not told).
    for (const tool of ["process.run", "test.run", "lint.run"]) {
      const r = await f.unapproved(tool, tool === "process.run" ? { command: "echo hi" } : {});
      assertHeldByKernelState(r);
      if (r.kind === "paused") assert.deepEqual(r.preview.secretFiles, [...SEALED_SHOWN], tool);
    }
    assert.deepEqual(held(f), [CONTAINER_STATE]);
    // A taker derives the hold from the log.
    const events = (await suite.stack.log.read(f.run.runId, 0)).map((e) => e.event);
    // The log's record has every root's padding too (its shape is fixed): the taker's first
    // scan ends all of it.
    const derived = taintFromEvents(events);
    await refreshTaint(derived, f.run.sandbox, f.run.nameKey as NameKey);
    assert.deepEqual([...derived.keys()], [CONTAINER_STATE]);
    const text = events
      .map((e) => JSON.stringify(e.payload.value, (_, v) => (typeof v === "bigint" ? `${v}` : v)))
      .join("\n");
    assert.equal(
      text.includes(CONTAINMENT_RULE),
      true,
      "the asks are recorded under secret.containment",
    );
  });
});
