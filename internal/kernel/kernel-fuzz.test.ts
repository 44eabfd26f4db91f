/**
 * Fuzzing the kernel: a few hundred random, malformed and oversize calls of every tool (and
 * of unknown tools), against a real container (busybox test image) and the embedded event
 * log. For every call: the kernel resolves (only the log's own errors may be thrown), the
 * log holds tool.call, policy.decision and a typed tool.result (or approval.requested and
 * run.paused), every event fits the size limit, and the chain verifies.
 *
 * Seeded: the seed is printed; AGENTD_FUZZ_SEED=<n> replays a run. Commands never run
 * unless chosen here: the fuzz policy asks a person for every command (each pause is then
 * denied), and only a fixed list of harmless commands is approved or run.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { isAgentdError } from "../errors.ts";
import { MAX_EVENT_BYTES } from "../eventlog/append-batcher.ts";
import { queued } from "../eventlog/conformance.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { Decision } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";

const CASES = 320;
const seed = Number(process.env.AGENTD_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

/**
 * mulberry32: a seeded PRNG small enough to read (no library needed for 32 bits of state;
 * Math.random cannot be seeded, and the point is to replay a failing run).
 */
function prng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = prng(seed);
const int = (n: number) => Math.floor(rnd() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
const chance = (p: number) => rnd() < p;

const ATOMS = [
  "a",
  "src/a.txt",
  "hello.txt",
  "..",
  "/",
  "/etc/passwd",
  ".git/config",
  ".env",
  "./",
  "*",
  "**/{a,b}",
  "\u0000",
  "\ud800",
  "\udc00",
  "😀",
  '"',
  "\\",
  "'",
  "$ENV.DEMO_TOKEN",
  "$(id)",
  "`id`",
  "\n",
  "\r\n",
  "\t",
  " ",
  "é",
  "\u202e",
  "-rf",
  "__proto__",
  "constructor",
];

/** A random string: mostly short mixes of hostile atoms, sometimes very long. */
function str(): string {
  const r = rnd();
  if (r < 0.03) return pick(ATOMS).repeat(Math.ceil(1_000_000 / 2));
  if (r < 0.08) return pick(ATOMS).repeat(pick([4097, 16 * 1024 + 1, 64 * 1024]));
  let s = "";
  const n = int(6);
  for (let i = 0; i < n; i++) s += chance(0.5) ? pick(ATOMS) : String.fromCharCode(int(0x10000));
  return s;
}

function deep(depth: number): unknown {
  let v: unknown = str();
  for (let i = 0; i < depth; i++) v = chance(0.5) ? [v] : { a: v };
  return v;
}

/** A random JSON value (what a model's tool-call arguments can parse to). */
function value(depth = 0): unknown {
  const r = rnd();
  if (r < 0.1) return null;
  if (r < 0.2) return chance(0.5);
  if (r < 0.35) return pick([0, -1, 1.5, 2 ** 53, -(2 ** 31), 1e308, -0, 100, 99_999_999]);
  if (r < 0.6 || depth > 3) return str();
  if (r < 0.75) return Array.from({ length: int(4) }, () => value(depth + 1));
  if (r < 0.8) return Array.from({ length: 200_000 }, (_, i) => i);
  if (r < 0.83) return deep(pick([50, 5_000, 60_000]));
  if (r < 0.86) return JSON.parse(`{"__proto__":${JSON.stringify({ path: str() })}}`);
  return Object.fromEntries(Array.from({ length: int(4) }, () => [str(), value(depth + 1)]));
}

/** Field names each tool knows, with a generator of plausible (often valid) values. */
const FIELDS: Record<string, Record<string, () => unknown>> = {
  "repo.read": {
    path: () => (chance(0.5) ? pick(["hello.txt", "src/a.txt", "nope.txt", "src"]) : str()),
    range: () =>
      chance(0.5) ? { start: 1 + int(3), end: 1 + int(5) } : { start: value(), end: value() },
  },
  "repo.search": {
    query: () => (chance(0.5) ? pick(["hello", "(unclosed", "a.*b"]) : str()),
    globs: () => (chance(0.5) ? ["*.txt"] : Array.from({ length: int(30) }, str)),
    caseSensitive: () => value(),
  },
  "repo.patch": {
    path: () => (chance(0.6) ? "fuzz.txt" : str()),
    edits: () =>
      chance(0.6)
        ? [{ oldText: chance(0.5) ? "" : "line", newText: chance(0.8) ? "line\n" : str() }]
        : value(),
    unifiedDiff: () =>
      chance(0.5) ? "--- a/fuzz.txt\n+++ b/fuzz.txt\n@@ -1 +1 @@\n-x\n+y\n" : str(),
  },
  "process.run": {
    command: () => (chance(0.5) ? pick(["echo hi", "ls", "sudo id", "rm -rf /"]) : str()),
    cwd: () => (chance(0.5) ? pick([".", "src", "../"]) : str()),
    timeoutMs: () => (chance(0.5) ? 1000 : value()),
  },
  "test.run": { name: () => (chance(0.5) ? "parser" : str()) },
  "lint.run": {},
};
const TOOLS = Object.keys(FIELDS);

function input(tool: string): unknown {
  if (chance(0.25)) return value();
  const fields = FIELDS[tool] ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, gen] of Object.entries(fields)) if (chance(0.6)) out[k] = gen();
  if (chance(0.15)) out[str()] = value();
  return out;
}

function call(i: number): { callId: string; tool: string; input: unknown } {
  const tool = chance(0.1)
    ? pick(["", "repo.reads", "REPO.READ", "x".repeat(int(2) === 0 ? 10 : 1_000_000), str()])
    : pick(TOOLS);
  return { callId: `f${i}`, tool, input: chance(0.01) ? undefined : input(tool) };
}

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const openPolicy: Policy = parsed.policy;
const fuzzPolicy: Policy = {
  ...openPolicy,
  capabilities: {
    ...openPolicy.capabilities,
    "process.run": { approval: "always" },
    "test.run": { approval: "always" },
    "lint.run": { approval: "always" },
  },
  tools: { test: "echo test {name}", lint: "echo lint" },
};

let dir: string;
let log: FileEventLog;
let box: SandboxHandle;
let cleanupBoxes: () => Promise<void>;
let run: KernelRun;
let fuzz: Kernel;
let open: Kernel;
let seen = 0;
let largest = { bytes: 0, type: "" };

before(async () => {
  console.log(`kernel fuzz seed: ${seed} (replay with AGENTD_FUZZ_SEED=${seed})`);
  dir = await mkdtemp(join(tmpdir(), "agentd-kernel-fuzz-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  const t = await testSandbox();
  cleanupBoxes = t.cleanup;
  const runId = ulid();
  box = await t.sandbox.create({
    runId,
    tenantId: "fuzz",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
      { path: "src/a.txt", type: "file", mode: 0o644, data: Buffer.from("one\ntwo\n") },
      { path: ".env", type: "file", mode: 0o644, data: Buffer.from("A=1\n") },
    ]),
  });
  await log.append(queued(runId, "fuzz"));
  run = { runId, sessionId: "s1", fence: await log.bumpEpoch(runId), sandbox: box };
  seen = 1; // run.queued
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  fuzz = createKernel({ log, policy: () => fuzzPolicy, secretProviders: [], artifacts });
  open = createKernel({ log, policy: () => openPolicy, secretProviders: [], artifacts });
});

after(async () => {
  await cleanupBoxes?.();
  await log?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The events appended since the last look, each checked against the size limit. */
async function fresh(): Promise<LoggedEvent[]> {
  const evs = await log.read(run.runId, seen);
  for (const e of evs) {
    const bytes = Buffer.byteLength(e.json);
    assert.ok(bytes <= MAX_EVENT_BYTES, `${e.type} seq ${e.seq}: ${bytes} bytes`);
    if (bytes > largest.bytes) largest = { bytes, type: e.type };
  }
  seen = evs.at(-1)?.seq ?? seen;
  return evs;
}

/** The call an event belongs to (artifact.emitted: by its name, tool-output/<call id>). */
/** A fuzz input for a failure message: short, and safe for inputs too deep to stringify. */
function brief(v: unknown): string {
  if (Array.isArray(v)) return `array(${v.length})`;
  if (v === null || typeof v !== "object") return JSON.stringify(v)?.slice(0, 200) ?? String(v);
  return `object{${Object.keys(v).slice(0, 8).join(",")}}`;
}

function callIdOf(e: LoggedEvent): string | undefined {
  const p = e.event.payload;
  switch (p.case) {
    case "toolCall":
    case "toolOutput":
    case "policyDecision":
    case "toolResult":
    case "toolStarted":
    case "approvalRequested":
      return p.value.callId;
    case "artifactEmitted":
      return p.value.name.replace(/^tool-output\//, "");
    default:
      return undefined;
  }
}

/**
 * The call's events without its tool.started, after checking it: at most one, right after
 * `before` (policy.decision for a call that runs without a person: one commit; nothing for
 * one resumed after its approval: its first event then); present for every success, absent
 * for a call `refused` before the effect (denied by the decision or by a person).
 */
function withoutStart(
  out: CallOutcome,
  types: string[],
  before: string | undefined,
  refused: boolean,
  where: string,
): string[] {
  const at = types.indexOf("tool.started");
  if (at >= 0) {
    assert.equal(types.lastIndexOf("tool.started"), at, `${where}: one tool.started`);
    assert.equal(at === 0 ? undefined : types[at - 1], before, `${where}: started after ${before}`);
  }
  if (out.kind === "result" && out.ok) assert.ok(at >= 0, `${where}: a success started`);
  if (refused) assert.equal(at, -1, `${where}: refused, never started`);
  return types.filter((t) => t !== "tool.started");
}

/**
 * Takes a call through the kernel and checks its events; a pause is denied (or approved,
 * when `approve`) and must end in a typed result too. Answers the final outcome.
 */
async function through(
  k: Kernel,
  c: { callId: string; tool: string; input: unknown },
  approve = false,
): Promise<CallOutcome> {
  const where = `seed ${seed}, call ${c.callId} (${c.tool.slice(0, 40)})`;
  let out: CallOutcome;
  try {
    out = await k.handle(run, c);
  } catch (err) {
    assert.fail(`${where}: the kernel threw ${(err as Error).stack}`);
  }
  const evs = await fresh();
  const types = evs.map((e) => e.type);
  assert.ok(
    evs.every((e) => e.type === "run.paused" || callIdOf(e) === c.callId),
    `${where}: events of other calls: ${types}`,
  );
  const core = types.filter((t) => t !== "tool.output" && t !== "artifact.emitted");
  if (out.kind === "paused") {
    assert.ok(!core.includes("tool.started"), `${where}: nothing starts before its approval`);
    assert.deepEqual(
      core,
      ["tool.call", "policy.decision", "approval.requested", "run.paused"],
      where,
    );
    out = await k.continueAfterApproval(run, c, { approved: approve, reason: "fuzz" });
    const after = (await fresh())
      .map((e) => e.type)
      .filter((t) => t !== "tool.output" && t !== "artifact.emitted");
    const code = out.kind === "result" ? out.error?.code : undefined;
    const refused = code === "EAPPROVAL_DENIED" || code === "EPOLICY"; // a person, or the recheck
    assert.deepEqual(withoutStart(out, after, undefined, refused, where), ["tool.result"], where);
  } else {
    const decided = evs.find((e) => e.event.payload.case === "policyDecision")?.event.payload;
    const denied = decided?.case === "policyDecision" && decided.value.decision === Decision.DENY;
    const rest = withoutStart(out, core, "policy.decision", denied, where);
    assert.deepEqual(rest, ["tool.call", "policy.decision", "tool.result"], where);
  }
  assert.equal(out.kind, "result", where);
  if (out.kind === "result" && !out.ok)
    assert.match(out.error?.code ?? "", /^E[A-Z_]+$/, `${where}: a typed error`);
  return out;
}

describe(`kernel fuzz (seed ${seed})`, () => {
  it(`${CASES} random calls of every tool each end in a decision and a typed result`, async () => {
    const started = Date.now();
    const codes = new Map<string, number>();
    for (let i = 0; i < CASES; i++) {
      const c = call(i);
      const out = await through(fuzz, c);
      const code = out.kind === "result" ? (out.ok ? "ok" : (out.error?.code ?? "?")) : "paused";
      codes.set(code, (codes.get(code) ?? 0) + 1);
      const known = Object.hasOwn(FIELDS, c.tool);
      const message = out.kind === "result" ? (out.error?.message ?? "") : "";
      // An input too large to record is refused first, whatever the tool.
      const unrecorded = code === "EVALIDATION" && /: input: /.test(message);
      if (!known)
        assert.ok(code === "EPOLICY" || unrecorded, `seed ${seed}, ${c.callId}: unknown tool`);
      else if (c.input === null || typeof c.input !== "object" || Array.isArray(c.input))
        // The input may be 60,000 levels deep: described by its type, never stringified.
        assert.equal(
          code,
          "EVALIDATION",
          `seed ${seed}, ${c.callId}: not an object: ${c.tool} ${brief(c.input)} ${message}`,
        );
    }
    console.log(
      `fuzz: ${CASES} calls in ${Date.now() - started} ms; outcomes ${JSON.stringify(Object.fromEntries(codes))}; largest event ${largest.bytes} bytes (${largest.type})`,
    );
    assert.ok((codes.get("EVALIDATION") ?? 0) > 0 && (codes.get("ok") ?? 0) > 0);
  });

  it("valid commands run, approved or not, with large and binary output", async () => {
    const commands = [
      "echo hi",
      "printf 'a\\0b\\001c\\377d'",
      "head -c 2000000 /dev/zero",
      "head -c 700000 /dev/zero | tr '\\0' '\"'",
      "exit 3",
      "cat hello.txt src/a.txt",
      "echo err >&2; echo out",
    ];
    for (const [i, command] of commands.entries()) {
      const out = await through(open, { callId: `v${i}`, tool: "process.run", input: { command } });
      assert.equal(
        out.kind === "result" && out.ok,
        true,
        `${command}: ${JSON.stringify(out).slice(0, 300)}`,
      );
      const approved = await through(
        fuzz,
        { callId: `va${i}`, tool: "process.run", input: { command } },
        true,
      );
      assert.equal(approved.kind === "result" && approved.ok, true, command);
    }
  });

  it("the chain verifies; a stale owner's call fails with EFENCED (the log's errors propagate)", async () => {
    const all = await log.read(run.runId, 0);
    const verdict = verifyChain(all.map((e) => e.json));
    assert.equal(verdict.ok, true, JSON.stringify(verdict));
    await log.bumpEpoch(run.runId);
    await assert.rejects(
      fuzz.handle(run, { callId: "late", tool: "repo.read", input: { path: "hello.txt" } }),
      (e) => isAgentdError(e, "EFENCED"),
    );
  });
});
