#!/usr/bin/env node
/**
 * Sandbox benchmark: `node bench/sandbox.ts` (what `make bench` runs; never run by the
 * tests). One run measures our Docker sandbox and tool layer against raw dockerode calls
 * on the same engine, same image, same moment (samples interleaved ours, raw, ours, raw…):
 *
 *  (a) container create + start + ready: `sandbox.create(spec)` (production limits, small
 *      workspace tar, no network) and a first `exec(["true"])`, vs raw
 *      `createContainer({Image, Cmd: sleep})` + `start()` + a raw exec of `true` (plus two
 *      raw sides that explain the ratio: network disabled as ours, and that + putArchive);
 *  (b) `process.run("true")` through `invokeTool` vs a raw exec of `true` in the same
 *      container;
 *  (c) `repo.search` over a generated 10,000-file repository vs a raw `rg --json` exec in
 *      the same container, for a rare and a common query.
 *
 * Prints a table per section, then one JSON line with every figure; every figure of ours
 * comes with its ratio to the raw baseline of the same run. Exit status 1 when a
 * correctness check fails (a wrong exit code or match count), 2 on bad arguments; a missed
 * speed target is reported, not fatal. See bench/README.md. About 90 s on 2 cores.
 */
import { availableParallelism } from "node:os";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { ulid } from "ulid";
import {
  createDockerSandbox,
  type DockerSandbox,
  LABEL_MANAGED,
  LABEL_RUN,
  LABEL_TENANT,
} from "../internal/sandbox/docker-sandbox.ts";
import type {
  Sandbox,
  SandboxHandle,
  SandboxLimits,
  SandboxSpec,
} from "../internal/sandbox/port.ts";
import { WORKSPACE } from "../internal/sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../internal/sandbox/workspace-archive.ts";
import { requireDocker, sandboxImage } from "../internal/testing/docker.ts";
import { invokeTool } from "../internal/tools/registry.ts";
import type { CommandResult } from "../internal/tools/run-command.ts";
import {
  DEFAULT_DENY_PATTERNS,
  DEFAULT_TOOL_LIMITS,
  type ToolContext,
} from "../internal/tools/tool.ts";

/** The limits a production run gets. */
const PROD_LIMITS: SandboxLimits = {
  memoryBytes: 512 * 1024 * 1024,
  cpus: 1,
  pids: 256,
  tmpBytes: 64 * 1024 * 1024,
};

/** Cold start against raw (issue #11); a warm hand-over to its first exec (issue #17). */
const STARTUP = { samples: 30, warmup: 2, targetP50: 1.15, targetP99: 1.15, warmReadyP50Ms: 100 };
/** process.run("true") through the agent: at most a tenth of a raw docker exec (issue #17). */
const EXEC = { samples: 200, warmup: 10, targetP50: 0.1 };
const SEARCH = {
  dirs: 100,
  filesPerDir: 100,
  linesPerFile: 20,
  /** Files holding the rare token, once each. */
  rareFiles: 7,
  rareToken: "FrobnicateQuuxFlag",
  /** In (nearly) every file: far more matches than maxSearchMatches. */
  commonToken: "return",
  samples: 20,
  warmup: 2,
};

const TENANT = "bench";
/** A sandbox exec of a trivial command never takes this long. */
const EXEC_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------
// Helpers

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

interface Dist {
  n: number;
  p50: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

function dist(xs: readonly number[]): Dist {
  const s = [...xs].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: round(percentile(s, 50)),
    p99: round(percentile(s, 99)),
    min: round(s[0] ?? Number.NaN),
    max: round(s[s.length - 1] ?? Number.NaN),
    mean: round(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)),
  };
}

const round = (n: number, d = 2): number => Number(n.toFixed(d));
const ms = (n: number): string => `${n.toFixed(1)} ms`;
const x = (n: number): string => `${n.toFixed(2)}x`;
const int = (n: number): string => Math.round(n).toLocaleString("en-US");
const verdict = (ok: boolean): string => (ok ? "met" : "MISSED");

function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows
    .map(
      (r) =>
        `    ${r
          .map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)))
          .join("   ")}`,
    )
    .join("\n");
}

/** Splits Docker's multiplexed attach stream (8-byte frame headers) into stdout text. */
function demuxStdout(raw: Buffer): string {
  const out: Buffer[] = [];
  let i = 0;
  while (i + 8 <= raw.length) {
    const size = raw.readUInt32BE(i + 4);
    if (raw[i] === 1) out.push(raw.subarray(i + 8, i + 8 + size));
    i += 8 + size;
  }
  return Buffer.concat(out).toString("utf8");
}

interface RawExecResult {
  /** null when the engine had not recorded the exit code yet at the one inspect. */
  exitCode: number | null;
  /** The attach stream as received (multiplexed), kept only when asked. */
  chunks: Buffer[];
  bytes: number;
}

/**
 * The cheapest honest exec through dockerode: create, start attached (hijacked), read the
 * stream to its end, one inspect for the exit code. No wrapper, no polling, no decoding.
 */
async function rawExec(
  container: Docker.Container,
  cmd: string[],
  keep = false,
): Promise<RawExecResult> {
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdout: true,
    AttachStderr: true,
    WorkingDir: WORKSPACE,
  });
  const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
  const chunks: Buffer[] = [];
  let bytes = 0;
  stream.on("data", (c: Buffer) => {
    bytes += c.length;
    if (keep) chunks.push(c);
  });
  await new Promise<void>((resolve, reject) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", reject);
  });
  const info = await exec.inspect();
  return { exitCode: info.Running ? null : info.ExitCode, chunks, bytes };
}

function file(path: string, text: string): WorkspaceFile {
  return { path, type: "file", mode: 0o644, data: Buffer.from(text) };
}

/** A few files, as a run would typically start with in the startup section. */
async function smallWorkspace(): Promise<Buffer> {
  return packWorkspace([
    file("README.md", "# demo\n\nA small project.\n"),
    file("package.json", '{ "name": "demo", "version": "1.0.0", "type": "module" }\n'),
    file("src/index.ts", 'export { add } from "./calc.ts";\n'),
    file(
      "src/calc.ts",
      "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
    ),
    file("test/calc.test.ts", 'import { add } from "../src/calc.ts";\nadd(1, 2);\n'),
  ]);
}

/** Deterministic pseudo-random numbers (mulberry32), so every run searches the same repo. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  "parse",
  "render",
  "update",
  "compute",
  "resolve",
  "load",
  "store",
  "encode",
  "decode",
  "merge",
  "filter",
  "build",
];
const NOUNS = ["Token", "Node", "Config", "Buffer", "Entry", "Index", "Range", "Value", "Frame"];

/**
 * ~20 lines of plausible TypeScript. Every file has 2 or 3 `return` lines; the files listed
 * in `rare` carry the rare token once.
 */
function sourceFile(d: number, f: number, next: () => number, rare: boolean): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const fn = `${pick(WORDS)}${pick(NOUNS)}${f}`;
  const ty = `${pick(NOUNS)}${d}`;
  const lines = [
    `import { ${pick(WORDS)}${pick(NOUNS)} } from "../mod${(d + 1) % SEARCH.dirs}/file${f}.ts";`,
    `import type { ${ty} } from "./types.ts";`,
    "",
    `/** ${pick(WORDS)}s a ${pick(NOUNS).toLowerCase()} of the ${pick(NOUNS).toLowerCase()} table. */`,
    `export function ${fn}(input: readonly ${ty}[], limit = ${Math.floor(next() * 1000)}): number {`,
    "  let total = 0;",
    "  for (const item of input) {",
    `    if (item.size > limit) continue;`,
    `    total += item.size * ${Math.floor(next() * 97) + 3};`,
    "  }",
    "  return total;",
    "}",
    "",
    `export class ${pick(NOUNS)}Cache${f} {`,
    `  readonly #items = new Map<string, ${ty}>();`,
    `  get(key: string): ${ty} | undefined {`,
    "    return this.#items.get(key);",
    "  }",
    "}",
    rare ? `export const flag = "${SEARCH.rareToken}"; // toggled by ops` : `// end of ${fn}`,
  ];
  if (next() < 0.5) lines.splice(12, 0, `export const ${fn}Default = () => { return 0; };`);
  return `${lines.join("\n")}\n`;
}

function generateRepo(): { files: WorkspaceFile[]; rareCount: number; contentBytes: number } {
  const next = rng(20_240_601);
  const total = SEARCH.dirs * SEARCH.filesPerDir;
  const rareAt = new Set<number>();
  while (rareAt.size < SEARCH.rareFiles) rareAt.add(Math.floor(next() * total));
  const files: WorkspaceFile[] = [];
  let contentBytes = 0;
  for (let d = 0; d < SEARCH.dirs; d++) {
    for (let f = 0; f < SEARCH.filesPerDir; f++) {
      const text = sourceFile(d, f, next, rareAt.has(d * SEARCH.filesPerDir + f));
      contentBytes += Buffer.byteLength(text);
      files.push(file(`src/mod${d}/file${f}.ts`, text));
    }
  }
  return { files, rareCount: rareAt.size, contentBytes };
}

function sandboxSpec(image: string, workspaceTar: Uint8Array): SandboxSpec {
  return {
    runId: ulid(),
    tenantId: TENANT,
    image,
    limits: PROD_LIMITS,
    network: "none",
    workspaceTar,
  };
}

function toolContext(box: SandboxHandle): ToolContext {
  return {
    sandbox: box,
    limits: DEFAULT_TOOL_LIMITS,
    denyPatterns: DEFAULT_DENY_PATTERNS,
    commands: {},
  };
}

/** Collects correctness failures; any one makes the exit status 1. */
const failures: string[] = [];
function check(ok: boolean, what: string): void {
  if (!ok && failures.length < 20) failures.push(what);
}

// ---------------------------------------------------------------------------------------
// (a) create + start + ready

/**
 * The raw sides of (a). `raw` is the baseline the target is set against; the other two
 * only explain the ratio (they share its interleave, so they see the same noise).
 */
const RAW_STARTUPS = {
  /** As specified: createContainer({Image, Cmd}), engine defaults (bridge network). */
  raw: { label: "raw", networkDisabled: false, putArchive: false },
  /**
   * Network as ours has it (NetworkDisabled + NetworkMode none: no libnetwork sandbox and
   * no prestart hook, which is most of the engine's start time), nothing else.
   */
  rawNoNet: { label: "raw, no network", networkDisabled: true, putArchive: false },
  /** The same plus putArchive of our workspace tar before start: the same work as ours. */
  rawNoNetTar: { label: "raw, no network + tar", networkDisabled: true, putArchive: true },
} as const;
type RawStartupName = keyof typeof RAW_STARTUPS;
const RAW_STARTUP_NAMES = Object.keys(RAW_STARTUPS) as RawStartupName[];

interface RawStartup extends Dist {
  createP50: number;
  /** putArchive before start (0 when the side does not put a tar). */
  putP50: number;
  startP50: number;
  execP50: number;
  /** ours / this side. */
  ratioP50: number;
  ratioP99: number;
}

interface StartupResult {
  samples: number;
  workspaceTarBytes: number;
  ours: Dist & { createP50: number; readyExecP50: number };
  /**
   * The same with a warm container ready (agentd's default: --warm-sandboxes 1, refilled
   * between runs; the refill is not timed): the run only waits for the hand-over.
   */
  oursWarm: Dist & { createP50: number; readyExecP50: number; ratioP50: number };
  raw: Record<RawStartupName, RawStartup>;
  /** Against `raw` (the specified baseline). */
  ratioP50: number;
  ratioP99: number;
  targetP50Met: boolean;
  targetP99Met: boolean;
  /** Warm: container handed over → first exec returned, p50 <= STARTUP.warmReadyP50Ms. */
  warmReadyMet: boolean;
}

async function benchStartup(
  docker: Docker,
  sandbox: Sandbox,
  warmSandbox: DockerSandbox,
  image: string,
  label: string,
): Promise<StartupResult> {
  const tar = await smallWorkspace();
  const samples = () => ({ total: [] as number[], create: [] as number[], ready: [] as number[] });
  const cold = samples();
  const warm = samples();
  const steps = (): Record<"total" | "create" | "put" | "start" | "exec", number[]> => ({
    total: [],
    create: [],
    put: [],
    start: [],
    exec: [],
  });
  const raws = {
    raw: steps(),
    rawNoNet: steps(),
    rawNoNetTar: steps(),
  } satisfies Record<RawStartupName, ReturnType<typeof steps>>;

  /** One sandbox.create + first exec of ours; `warm`: the pool refilled first (not timed). */
  const oneOurs = async (
    from: Sandbox,
    into: ReturnType<typeof samples>,
    record: boolean,
  ): Promise<void> => {
    const spec = sandboxSpec(image, tar);
    if (from === warmSandbox) await warmSandbox.prewarm(spec);
    const t0 = performance.now();
    const box = await from.create(spec);
    const t1 = performance.now();
    try {
      const r = await box.exec({
        argv: ["true"],
        timeoutMs: EXEC_TIMEOUT_MS,
        maxOutputBytes: 64 * 1024,
      });
      const t2 = performance.now();
      check(r.exitCode === 0, `(a) ours: first exec of true exited ${r.exitCode}`);
      if (record) {
        into.total.push(t2 - t0);
        into.create.push(t1 - t0);
        into.ready.push(t2 - t1);
      }
    } finally {
      await box.destroy();
    }
  };

  const oneRaw = async (name: RawStartupName, record: boolean): Promise<void> => {
    const side = RAW_STARTUPS[name];
    const t0 = performance.now();
    const c = await docker.createContainer({
      Image: image,
      Cmd: ["sleep", "2147483647"],
      // Labels only so the final reap finds it if a sample fails half-way.
      Labels: { [LABEL_RUN]: ulid(), [LABEL_TENANT]: TENANT, [LABEL_MANAGED]: label },
      ...(side.networkDisabled
        ? { NetworkDisabled: true, HostConfig: { NetworkMode: "none" } }
        : {}),
    });
    try {
      const t1 = performance.now();
      if (side.putArchive) await c.putArchive(tar, { path: WORKSPACE });
      const t2 = performance.now();
      await c.start();
      const t3 = performance.now();
      const r = await rawExec(c, ["true"]);
      const t4 = performance.now();
      check(
        r.exitCode === 0 || r.exitCode === null,
        `(a) ${name}: exec of true exited ${r.exitCode}`,
      );
      if (record) {
        const into = raws[name];
        into.total.push(t4 - t0);
        into.create.push(t1 - t0);
        into.put.push(t2 - t1);
        into.start.push(t3 - t2);
        into.exec.push(t4 - t3);
      }
    } finally {
      await c.remove({ force: true, v: true });
    }
  };

  for (let i = 0; i < STARTUP.warmup + STARTUP.samples; i++) {
    const record = i >= STARTUP.warmup;
    await oneOurs(sandbox, cold, record);
    await oneOurs(warmSandbox, warm, record);
    for (const name of RAW_STARTUP_NAMES) await oneRaw(name, record);
  }
  const o = dist(cold.total);
  const med = (xs: number[]): number => dist(xs).p50;
  const rawDist = (name: RawStartupName): RawStartup => {
    const r = raws[name];
    const d = dist(r.total);
    return {
      ...d,
      createP50: med(r.create),
      putP50: med(r.put),
      startP50: med(r.start),
      execP50: med(r.exec),
      ratioP50: round(o.p50 / d.p50, 3),
      ratioP99: round(o.p99 / d.p99, 3),
    };
  };
  const raw = {
    raw: rawDist("raw"),
    rawNoNet: rawDist("rawNoNet"),
    rawNoNetTar: rawDist("rawNoNetTar"),
  };
  return {
    samples: STARTUP.samples,
    workspaceTarBytes: tar.byteLength,
    ours: { ...o, createP50: med(cold.create), readyExecP50: med(cold.ready) },
    oursWarm: {
      ...dist(warm.total),
      createP50: med(warm.create),
      readyExecP50: med(warm.ready),
      ratioP50: round(dist(warm.total).p50 / raw.raw.p50, 3),
    },
    raw,
    ratioP50: raw.raw.ratioP50,
    ratioP99: raw.raw.ratioP99,
    targetP50Met: raw.raw.ratioP50 <= STARTUP.targetP50,
    targetP99Met: raw.raw.ratioP99 <= STARTUP.targetP99,
    warmReadyMet: dist(warm.total).p50 <= STARTUP.warmReadyP50Ms,
  };
}

// ---------------------------------------------------------------------------------------
// (b) process.run("true") vs raw exec

interface ExecBenchResult {
  samples: number;
  ours: Dist;
  /** The same tool call on a sandbox with the agent off (docker exec): what #17 replaced. */
  oursViaDockerExec: Dist;
  raw: Dist;
  ratioP50: number;
  ratioP99: number;
  /** Raw execs whose exit code was not recorded yet at the single inspect after the stream ended. */
  rawExitCodeLate: number;
  targetP50Met: boolean;
}

async function benchExec(
  docker: Docker,
  box: SandboxHandle,
  viaExec: SandboxHandle,
): Promise<ExecBenchResult> {
  const container = docker.getContainer(box.id);
  const ctx = toolContext(box);
  const ctxExec = toolContext(viaExec);
  const ours: number[] = [];
  const oursExec: number[] = [];
  const raw: number[] = [];
  let late = 0;
  const oneOurs = async (c = ctx): Promise<number> => {
    const t0 = performance.now();
    const r = (await invokeTool(c, "process.run", { command: "true" })) as CommandResult;
    const t = performance.now() - t0;
    check(r.exitCode === 0, `(b) process.run("true") exited ${r.exitCode}: ${r.stderr}`);
    return t;
  };
  const oneRaw = async (): Promise<number> => {
    const t0 = performance.now();
    const r = await rawExec(container, ["true"]);
    const t = performance.now() - t0;
    if (r.exitCode === null) late++;
    else check(r.exitCode === 0, `(b) raw exec of true exited ${r.exitCode}`);
    return t;
  };
  for (let i = 0; i < EXEC.warmup; i++) {
    await oneOurs();
    await oneOurs(ctxExec);
    await oneRaw();
  }
  late = 0;
  for (let i = 0; i < EXEC.samples; i++) {
    ours.push(await oneOurs());
    oursExec.push(await oneOurs(ctxExec));
    raw.push(await oneRaw());
  }
  const o = dist(ours);
  const r = dist(raw);
  return {
    samples: EXEC.samples,
    ours: o,
    oursViaDockerExec: dist(oursExec),
    raw: r,
    ratioP50: round(o.p50 / r.p50, 3),
    ratioP99: round(o.p99 / r.p99, 3),
    rawExitCodeLate: late,
    targetP50Met: o.p50 / r.p50 <= EXEC.targetP50,
  };
}

// ---------------------------------------------------------------------------------------
// (c) repo.search vs raw rg --json

interface SearchQueryResult {
  query: string;
  samples: number;
  ours: Dist;
  raw: Dist;
  ratioP50: number;
  /** What repo.search returned (checked every sample). */
  oursMatches: number;
  oursTruncated: boolean;
  /** Matches in the raw rg output (the whole output, counted once, untimed). */
  rawMatches: number;
  /** Bytes of the raw attach stream read per sample (all of rg's output). */
  rawOutputBytes: number;
}

interface SearchResult {
  files: number;
  contentBytes: number;
  tarBytes: number;
  createMs: number;
  maxSearchMatches: number;
  queries: SearchQueryResult[];
}

interface SearchMatchesOut {
  matches: unknown[];
  truncated: boolean;
}

async function benchSearch(docker: Docker, sandbox: Sandbox, image: string): Promise<SearchResult> {
  const repo = generateRepo();
  const tar = await packWorkspace(repo.files);
  const t0 = performance.now();
  const box = await sandbox.create(sandboxSpec(image, tar));
  const createMs = performance.now() - t0;
  try {
    const container = docker.getContainer(box.id);
    const ctx = toolContext(box);
    const max = ctx.limits.maxSearchMatches;
    const queries: SearchQueryResult[] = [];
    for (const [query, expectRare] of [
      [SEARCH.rareToken, true],
      [SEARCH.commonToken, false],
    ] as const) {
      const ours: number[] = [];
      const raw: number[] = [];
      let oursMatches = 0;
      let oursTruncated = false;
      let rawBytes = 0;
      const oneOurs = async (): Promise<number> => {
        const s = performance.now();
        const r = (await invokeTool(ctx, "repo.search", { query })) as SearchMatchesOut;
        const t = performance.now() - s;
        oursMatches = r.matches.length;
        oursTruncated = r.truncated;
        if (expectRare) {
          check(
            r.matches.length === repo.rareCount && !r.truncated,
            `(c) repo.search ${query}: ${r.matches.length} matches, expected ${repo.rareCount}`,
          );
        } else {
          check(
            r.matches.length === max && r.truncated,
            `(c) repo.search ${query}: ${r.matches.length} matches (truncated ${r.truncated}), expected ${max}, truncated`,
          );
        }
        return t;
      };
      const oneRaw = async (): Promise<number> => {
        const s = performance.now();
        const r = await rawExec(container, ["rg", "--json", query, "."]);
        const t = performance.now() - s;
        rawBytes = r.bytes;
        check(r.exitCode === 0 || r.exitCode === null, `(c) raw rg ${query} exited ${r.exitCode}`);
        return t;
      };
      for (let i = 0; i < SEARCH.warmup; i++) {
        await oneOurs();
        await oneRaw();
      }
      for (let i = 0; i < SEARCH.samples; i++) {
        ours.push(await oneOurs());
        raw.push(await oneRaw());
      }
      // Untimed: what the raw side actually found.
      const full = await rawExec(container, ["rg", "--json", query, "."], true);
      const text = demuxStdout(Buffer.concat(full.chunks));
      const rawMatches = text.split("\n").filter((l) => l.startsWith('{"type":"match"')).length;
      if (expectRare) {
        check(rawMatches === repo.rareCount, `(c) raw rg ${query}: ${rawMatches} matches`);
      }
      const o = dist(ours);
      const r = dist(raw);
      queries.push({
        query,
        samples: SEARCH.samples,
        ours: o,
        raw: r,
        ratioP50: round(o.p50 / r.p50, 3),
        oursMatches,
        oursTruncated,
        rawMatches,
        rawOutputBytes: rawBytes,
      });
    }
    return {
      files: repo.files.length,
      contentBytes: repo.contentBytes,
      tarBytes: tar.byteLength,
      createMs: round(createMs, 1),
      maxSearchMatches: max,
      queries,
    };
  } finally {
    await box.destroy();
  }
}

// ---------------------------------------------------------------------------------------
// Report

function reportStartup(a: StartupResult): void {
  console.log(
    `(a) create + start + ready: sandbox.create(spec) + first exec(["true"]) vs raw createContainer + start + exec "true"`,
  );
  console.log(
    `    ${a.samples} samples per side, interleaved (ours, then each raw side, repeated), after ${STARTUP.warmup} warm-up each; every container removed after its sample (not timed).`,
  );
  console.log(
    "    Ready = a first exec of `true` has returned its exit code, on every side (same definition, so the ratios are fair).",
  );
  console.log(
    "    ours, warm: the same sandbox with a warm container ready (agentd's default --warm-sandboxes 1; its refill between samples is not timed).",
  );
  console.log(
    `    ours: base image, ${int(a.workspaceTarBytes)}-byte workspace tar (5 files), ${PROD_LIMITS.memoryBytes / 1024 ** 2} MiB, ${PROD_LIMITS.cpus} CPU, ${PROD_LIMITS.pids} pids, ${PROD_LIMITS.tmpBytes / 1024 ** 2} MiB /tmp, network none (disabled), hardened, init, volume.`,
  );
  console.log(
    "    raw: same image, Cmd sleep, engine defaults (bridge network, no limits, no volume, no tar): the baseline of the target.",
  );
  console.log(
    "    The two other raw sides only explain the ratio: 'no network' = NetworkDisabled + NetworkMode none as ours (the engine then",
  );
  console.log(
    "    skips its network sandbox and prestart hook); '+ tar' = the same plus putArchive of our tar before start (ours' work, raw).",
  );
  const rawRow = (r: RawStartup, name: string): string[] => [
    name,
    ms(r.p50),
    ms(r.p99),
    ms(r.min),
    x(r.ratioP50),
    x(r.ratioP99),
    `create ${ms(r.createP50)}${r.putP50 >= 0.05 ? ` + putArchive ${ms(r.putP50)}` : ""} + start ${ms(r.startP50)} + exec ${ms(r.execP50)}`,
  ];
  console.log(
    table([
      [
        "",
        "p50",
        "p99 (= max)",
        "min",
        "ours/it p50",
        "ours/it p99",
        "breakdown (p50 of each step)",
      ],
      [
        "ours",
        ms(a.ours.p50),
        ms(a.ours.p99),
        ms(a.ours.min),
        "",
        "",
        `create() ${ms(a.ours.createP50)} + first exec ${ms(a.ours.readyExecP50)}`,
      ],
      [
        "ours, warm",
        ms(a.oursWarm.p50),
        ms(a.oursWarm.p99),
        ms(a.oursWarm.min),
        "",
        "",
        `create() ${ms(a.oursWarm.createP50)} (hand-over) + first exec ${ms(a.oursWarm.readyExecP50)}; ${x(a.oursWarm.ratioP50)} of raw at p50`,
      ],
      ...RAW_STARTUP_NAMES.map((n) => rawRow(a.raw[n], RAW_STARTUPS[n].label)),
    ]),
  );
  console.log(
    `    target: ours/raw <= ${x(STARTUP.targetP50)}: p50 ${x(a.ratioP50)} ${verdict(a.targetP50Met)}, p99 ${x(a.ratioP99)} ${verdict(a.targetP99Met)}`,
  );
  console.log(
    `    target: warm ready (handed over -> first exec returned) p50 <= ${ms(STARTUP.warmReadyP50Ms)}: ${ms(a.oursWarm.p50)} ${verdict(a.warmReadyMet)} (${x(a.oursWarm.p50 / a.raw.raw.execP50)} of one raw docker exec)`,
  );
  console.log("");
}

function reportExec(b: ExecBenchResult): void {
  console.log(
    `(b) process.run("true") via invokeTool (through the in-container agent) vs raw docker exec of true (create, attach, read to end, one inspect), same container`,
  );
  console.log(
    `    ${b.samples} samples per side, interleaved, after ${EXEC.warmup} warm-up each. Raw exit code not yet recorded at its single inspect: ${b.rawExitCodeLate} of ${b.samples}.`,
  );
  console.log(
    "    'agent off': the same tool call in a container of the same image made with the agent off (agent: false), through docker exec and the sh wrapper: the fallback, and what issue #17 replaced.",
  );
  console.log(
    table([
      ["", "p50", "p99", "min", "mean"],
      ["ours", ms(b.ours.p50), ms(b.ours.p99), ms(b.ours.min), ms(b.ours.mean)],
      [
        "ours, agent off (docker exec)",
        ms(b.oursViaDockerExec.p50),
        ms(b.oursViaDockerExec.p99),
        ms(b.oursViaDockerExec.min),
        ms(b.oursViaDockerExec.mean),
      ],
      ["raw", ms(b.raw.p50), ms(b.raw.p99), ms(b.raw.min), ms(b.raw.mean)],
      [
        "ratio ours/raw",
        x(b.ratioP50),
        x(b.ratioP99),
        "",
        `target p50 <= ${x(EXEC.targetP50)}: ${verdict(b.targetP50Met)}`,
      ],
    ]),
  );
  console.log("");
}

function reportSearch(c: SearchResult): void {
  console.log(
    `(c) repo.search via invokeTool vs raw \`rg --json <query> .\` exec (all output read), same container`,
  );
  console.log(
    `    Repository: ${int(c.files)} files (${SEARCH.dirs} dirs x ${SEARCH.filesPerDir}), ${(c.contentBytes / 1024 ** 2).toFixed(1)} MiB of text, ${(c.tarBytes / 1024 ** 2).toFixed(1)} MiB tar; sandbox.create with it took ${ms(c.createMs)}.`,
  );
  console.log(
    `    ${SEARCH.samples} samples per side and query, interleaved, after ${SEARCH.warmup} warm-up each; maxSearchMatches ${c.maxSearchMatches}.`,
  );
  console.log(
    table([
      [
        "query",
        "ours p50",
        "raw p50",
        "ratio p50",
        "ours p99",
        "raw p99",
        "ours returns",
        "raw reads",
      ],
      ...c.queries.map((q) => [
        q.query,
        ms(q.ours.p50),
        ms(q.raw.p50),
        x(q.ratioP50),
        ms(q.ours.p99),
        ms(q.raw.p99),
        `${int(q.oursMatches)} matches${q.oursTruncated ? " (truncated)" : ""}`,
        `${int(q.rawMatches)} matches, ${(q.rawOutputBytes / 1024).toFixed(0)} KiB`,
      ]),
    ]),
  );
  console.log("");
}

// ---------------------------------------------------------------------------------------
// Main

const USAGE = `usage: node bench/sandbox.ts [a] [b] [c]
  a  container create + start + ready: sandbox.create + first exec vs raw dockerode
  b  process.run("true") through the tool layer vs a raw exec
  c  repo.search over a 10,000-file repository vs a raw rg --json exec
Default: all three.`;

async function main(argv: string[]): Promise<number> {
  if (argv.some((a) => !["a", "b", "c"].includes(a))) {
    console.error(USAGE);
    return 2;
  }
  const sections = new Set(argv.length === 0 ? ["a", "b", "c"] : argv);
  const started = performance.now();
  const docker = await requireDocker();
  const image = sandboxImage("base");
  const label = `bench-${ulid().toLowerCase()}`;
  const sandbox = createDockerSandbox({ docker, managedLabel: label });
  const engine = (await docker.version()).Version;
  const cpus = availableParallelism();

  let reaping: Promise<string[]> | undefined;
  const reap = (): Promise<string[]> => {
    reaping ??= sandbox.reap(() => false);
    return reaping;
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    console.error(`bench/sandbox: ${sig}: removing the bench's containers`);
    reap().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  console.log(
    `agentd sandbox benchmark: node ${process.version}, ${cpus} CPUs, Docker engine ${engine}, image ${image}; label agentd.managed=${label}\n`,
  );
  let a: StartupResult | undefined;
  let b: ExecBenchResult | undefined;
  let c: SearchResult | undefined;
  let leftOver: string[] = [];
  try {
    if (sections.has("a")) {
      console.log("running (a) create + start + ready...");
      const warmSandbox = createDockerSandbox({ docker, managedLabel: label, warm: 1 });
      try {
        a = await benchStartup(docker, sandbox, warmSandbox, image, label);
      } finally {
        await warmSandbox.close();
      }
    }
    if (sections.has("b")) {
      console.log("running (b) process.run...");
      const box = await sandbox.create(sandboxSpec(image, await smallWorkspace()));
      const noAgent = createDockerSandbox({ docker, managedLabel: label, agent: false });
      const viaExec = await noAgent.create(sandboxSpec(image, await smallWorkspace()));
      try {
        b = await benchExec(docker, box, viaExec);
      } finally {
        await box.destroy();
        await viaExec.destroy();
      }
    }
    if (sections.has("c")) {
      console.log("running (c) repo.search...");
      c = await benchSearch(docker, sandbox, image);
    }
    console.log("");
  } finally {
    leftOver = await reap();
  }
  check(leftOver.length === 0, `containers left over and reaped: ${leftOver.length}`);

  if (a) reportStartup(a);
  if (b) reportExec(b);
  if (c) reportSearch(c);

  const summary = {
    bench: "sandbox",
    node: process.version,
    cpus,
    docker: engine,
    image,
    limits: PROD_LIMITS,
    startup: a,
    exec: b,
    search: c,
    ratios: {
      startupP50: a?.ratioP50,
      startupP99: a?.ratioP99,
      startupVsNoNetworkP50: a?.raw.rawNoNet.ratioP50,
      startupVsNoNetworkTarP50: a?.raw.rawNoNetTar.ratioP50,
      processRunP50: b?.ratioP50,
      processRunP99: b?.ratioP99,
      warmReadyP50Ms: a?.oursWarm.p50,
      searchRareP50: c?.queries[0]?.ratioP50,
      searchCommonP50: c?.queries[1]?.ratioP50,
    },
    targets: {
      startupP50: a?.targetP50Met,
      startupP99: a?.targetP99Met,
      processRunP50: b?.targetP50Met,
      warmReadyP50: a?.warmReadyMet,
    },
    failures,
    seconds: round((performance.now() - started) / 1000, 1),
  };
  for (const f of failures) console.log(`FAILED: ${f}`);
  console.log(
    `total ${summary.seconds} s; checks ${failures.length === 0 ? "ok" : `FAILED (${failures.length})`}`,
  );
  console.log(JSON.stringify(summary));
  return failures.length === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`bench/sandbox: ${(err as Error).stack ?? String(err)}`);
    process.exit(1);
  },
);
