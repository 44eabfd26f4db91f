#!/usr/bin/env node
/**
 * agentctl: the command-line client of agentd. Talks gRPC (HTTP/2) to `agentd server` or
 * `agentd dev`; address and token from --addr/--token or AGENTD_ADDR/AGENTD_TOKEN.
 * `agentctl --help` lists the commands; every command has --help.
 */
import { createHash } from "node:crypto";
import { realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve as pathResolve } from "node:path";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { create, toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { followEvents, TERMINAL_TYPES } from "../../clients/typescript/src/follow.ts";
import {
  formatBytes,
  gitRemoteUrl,
  inGitWorkTree,
  PackError,
  packWorkspace,
} from "../../clients/typescript/src/pack.ts";
import { sendWorkspace } from "../../clients/typescript/src/upload.ts";
import { toLabelValue } from "../../internal/api/labels.ts";
import { RUN_REUSED_HEADER } from "../../internal/api/reused-header.ts";
import { archiveClient } from "../../internal/archive/archive-client.ts";
import { ArchiveError } from "../../internal/archive/archive-files.ts";
import { type OpenedArchive, openArchive } from "../../internal/archive/open-archive.ts";
import { mayRace, nudgeResume, resolve } from "../../internal/cli/approval.ts";
import {
  CliError,
  connect,
  type Endpoint,
  type ErrorContext,
  EXIT,
  explainError,
  type RunClient,
  resolveEndpoint,
  UsageError,
} from "../../internal/cli/client.ts";
import { type OutputFormat, outputFormatOf } from "../../internal/cli/output/format.ts";
import { formatList, formatResource } from "../../internal/cli/output/print.ts";
import {
  approvalResource,
  eventResource,
  policyChangeResource,
  principalResource,
  runResource,
} from "../../internal/cli/output/resources.ts";
import { jsonLine, safeJson } from "../../internal/cli/output/serialize.ts";
import {
  parseSince,
  renderReport,
  type ShadowItem,
  summariseShadows,
} from "../../internal/cli/policy-report.ts";
import { eventLine, formatPreview } from "../../internal/cli/render.ts";
import { escapeMessage } from "../../internal/cli/safe-message.ts";
import {
  formatCost,
  formatCount,
  makeStyle,
  oneLine,
  ordinal,
  wantColor,
} from "../../internal/cli/style.ts";
import { didYouMean } from "../../internal/cli/suggest.ts";
import { createTerminalOut } from "../../internal/cli/terminal-out.ts";
import { escapeControls } from "../../internal/cli/terminal-safe.ts";
import { headVerdict, parseHead, recordedLoss } from "../../internal/cli/verify-head.ts";
import { stateCode, waitRun } from "../../internal/cli/wait.ts";
import { approvalHint, outcomeCode, watchRun } from "../../internal/cli/watch.ts";
import { canonicalJson } from "../../internal/eventlog/canonical-json.ts";
import { verifyChain } from "../../internal/eventlog/hash-chain.ts";
import {
  type Event,
  EventSchema,
  PolicyChangeState,
  ProposedRuleKind,
  ReviewOverriddenSchema,
} from "../../internal/gen/agentd/v1/events_pb.js";
import {
  type Approval,
  ApprovalSchema,
  DeleteRunResponseSchema,
  type PolicyChange,
  PolicyChangeSchema,
  type PurgeTenantResponse,
  PurgeTenantResponseSchema,
  type Run,
  RunSchema,
  RunState,
} from "../../internal/gen/agentd/v1/run_service_pb.js";
import { Duration } from "../../internal/kernel/policy-schema.ts";
import {
  COMMANDS,
  type CommandSpec,
  commandHelp,
  DEFAULT_MAX_WORKSPACE,
  findCommand,
  GLOBAL_FLAGS,
  mainHelp,
  parseOptions,
} from "./help.ts";
import { LOCAL_COMMANDS } from "./local.ts";

type Values = Record<string, string | boolean | string[] | undefined>;

interface Ctx {
  spec: CommandSpec;
  values: Values;
  args: string[];
  ep: Endpoint;
  client: RunClient;
  signal: AbortSignal;
  /** What the request is about, for error messages. */
  about: ErrorContext;
  /** -o/--output: how to print the resource; undefined: the human text. */
  output: OutputFormat | undefined;
}

// Every byte agentctl prints goes through these (internal/cli/terminal-out.ts): server text
// can never drive the terminal, whichever command or error prints it. All of them escape
// every ESC (SGR too); the styled ones then turn agentctl's own color marks (style.ts) into
// colors, the plain ones drop them. The renderings that color escape their fields before
// laying them out too (internal/cli/safe-message.ts).
const stdout = createTerminalOut(process.stdout, false);
const stdoutStyled = createTerminalOut(process.stdout, wantColor(process.stdout.isTTY === true));
/** What the command is about (set as soon as known), for messages. */
const about: ErrorContext = {};
const stderr = createTerminalOut(process.stderr, false);
const stderrStyled = createTerminalOut(process.stderr, wantColor(process.stderr.isTTY === true));

function info(s: string): void {
  stderr.write(`${s}\n`);
}

function str(v: Values, k: string): string | undefined {
  const x = v[k];
  return typeof x === "string" ? x : undefined;
}

function intFlag(
  v: Values,
  k: string,
  min: number,
  max: number,
  command: string,
): number | undefined {
  const s = str(v, k);
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s) || Number(s) < min || Number(s) > max) {
    throw new UsageError(
      `--${k} must be a whole number from ${min} to ${max} (got ${JSON.stringify(s)})`,
      command,
    );
  }
  return Number(s);
}

// --- the command line ------------------------------------------------------------------

/** Splits argv into the command (one or two words) and the rest; global flags stay in. */
function splitCommand(argv: string[]): { name: string | undefined; rest: string[] } {
  const takesValue = new Set([
    ...Object.entries(GLOBAL_FLAGS)
      .filter(([, f]) => f.type === "string")
      .map(([n]) => `--${n}`),
    // -o/--output before the command (agentctl -o json get RUN), as kubectl takes it.
    "-o",
    "--output",
  ]);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === "--") break;
    if (takesValue.has(a)) {
      i++;
      continue;
    }
    if (a.startsWith("-")) continue;
    const rest = [...argv.slice(0, i), ...argv.slice(i + 1)];
    if (a === "artifact" || a === "config" || a === "policy" || a === "review") {
      // Commands with a subcommand: artifact get, config use-context, policy changes, review override…
      const j = rest.findIndex((x, k) => k >= i && !x.startsWith("-"));
      if (j >= 0 && findCommand(`${a} ${rest[j]}`) !== undefined) {
        const sub = rest[j] as string;
        rest.splice(j, 1);
        return { name: `${a} ${sub}`, rest };
      }
      return { name: a, rest };
    }
    return { name: a, rest };
  }
  return { name: undefined, rest: argv };
}

async function main(argv: string[], signal: AbortSignal): Promise<number> {
  const { name, rest } = splitCommand(argv);
  if (name === undefined && (rest.includes("--version") || rest.includes("-V")))
    return LOCAL_COMMANDS.version?.([], {}) ?? EXIT.OK;
  if (name === undefined) {
    const wantsHelp = rest.includes("--help") || rest.includes("-h");
    (wantsHelp ? stdout : stderr).write(mainHelp());
    return wantsHelp ? EXIT.OK : EXIT.USAGE;
  }
  if (name === "help") {
    const topic = rest.filter((a) => !a.startsWith("-")).join(" ");
    if (topic === "") {
      stdout.write(mainHelp());
      return EXIT.OK;
    }
    const c = findCommand(
      topic === "artifact"
        ? "artifact get"
        : topic === "review"
          ? "review override"
          : topic === "policy"
            ? "policy changes"
            : topic,
    );
    if (c === undefined) throw new UsageError(`no command ${JSON.stringify(topic)}`);
    stdout.write(commandHelp(c));
    return EXIT.OK;
  }
  const spec = findCommand(
    name === "artifact"
      ? "artifact get"
      : name === "config"
        ? "config use-context"
        : name === "policy"
          ? "policy changes"
          : name === "review"
            ? "review override"
            : name,
  );
  if (spec === undefined) {
    const known = [...new Set(COMMANDS.map((c) => c.name.split(" ")[0] as string))];
    throw new UsageError(`unknown command ${JSON.stringify(name)}${didYouMean(name, known)}`);
  }
  if (name === "policy" && !(rest.includes("--help") || rest.includes("-h"))) {
    throw new UsageError(
      "policy needs a subcommand: changes, apply ID, reject ID, report --since WHEN",
      spec.name,
    );
  }
  if (name === "review" && !(rest.includes("--help") || rest.includes("-h"))) {
    throw new UsageError(
      'review needs a subcommand: "review override CALL_OR_APPROVAL --verdict allow|deny --reason TEXT"',
      spec.name,
    );
  }
  if (name === "artifact" && !(rest.includes("--help") || rest.includes("-h"))) {
    throw new UsageError('artifact needs a subcommand: "artifact get RUN"', spec.name);
  }
  if (name === "config" && !(rest.includes("--help") || rest.includes("-h"))) {
    throw new UsageError(
      "config needs a subcommand: use-context, set-context, get-contexts, current-context, delete-context",
      spec.name,
    );
  }
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({
      args: rest,
      options: parseOptions(spec),
      allowPositionals: true,
      strict: true,
    }) as { values: Values; positionals: string[] };
  } catch (err) {
    const message = (err as Error).message.replace(/\. To specify a positional.*$/s, "");
    const unknown = /^Unknown option '--([^'=]+)'/.exec(message)?.[1];
    const flags = Object.keys(parseOptions(spec));
    throw new UsageError(
      unknown === undefined ? message : `${message}${didYouMean(unknown, flags, "--")}`,
      spec.name,
    );
  }
  if (parsed.values.help === true) {
    stdout.write(commandHelp(spec));
    return EXIT.OK;
  }
  if (parsed.values.archive !== undefined) return fromArchive(spec, parsed, signal);
  if (parsed.positionals.length !== spec.args.length) {
    throw new UsageError(
      spec.args.length === 0
        ? `unexpected argument ${JSON.stringify(parsed.positionals[0])}`
        : parsed.positionals.length === 0
          ? `give the ${spec.args.join(" ")} argument`
          : `give exactly one ${spec.args.join(" ")} argument`,
      spec.name,
    );
  }
  const local = LOCAL_COMMANDS[spec.name];
  if (local !== undefined) return local(parsed.positionals, parsed.values);
  const ep = resolveEndpoint({
    addr: str(parsed.values, "addr"),
    token: str(parsed.values, "token"),
    context: str(parsed.values, "context"),
    caFile: str(parsed.values, "ca-file"),
  });
  const ctx: Ctx = {
    spec,
    values: parsed.values,
    args: parsed.positionals,
    ep,
    client: connect(ep),
    signal,
    about,
    // Parsed before any request: a bad format or template costs nothing (exit 64).
    output: outputFormatOf(parsed.values, spec.name),
  };
  try {
    return (await HANDLERS[spec.name]?.(ctx)) ?? EXIT.USAGE;
  } catch (err) {
    if (err instanceof ConnectError) {
      if (err.code === Code.Canceled && signal.aborted) return EXIT.INTERRUPTED;
      throw new CliError(explainError(err, ep, ctx.about));
    }
    throw err;
  }
}

// --- run ---------------------------------------------------------------------------------

/**
 * The repo label: the origin URL without credentials or scheme (`github.com/org/repo` →
 * `github.com-org-repo`), else the directory's name, as a valid label value.
 */
function repoLabel(root: string): string {
  const url = inGitWorkTree(root) ? gitRemoteUrl(root) : undefined;
  let label: string;
  if (url !== undefined) {
    try {
      const u = new URL(url);
      u.username = "";
      u.password = "";
      label = `${u.host}${u.pathname}`;
    } catch {
      // scp-like (git@host:org/repo): the user goes, host:path reads as host/path.
      label = url.replace(/^[^@/]*@/, "").replace(":", "/");
    }
    label = label.replace(/\.git$/, "").replace(/\/$/, "");
  } else {
    label = basename(realpathSync(root));
  }
  return toLabelValue(label);
}

function labelsOf(v: Values, root: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const kv of (v.label as string[] | undefined) ?? []) {
    const i = kv.indexOf("=");
    if (i <= 0)
      throw new UsageError(`--label must be KEY=VALUE (got ${JSON.stringify(kv)})`, "run");
    labels[kv.slice(0, i)] = kv.slice(i + 1);
  }
  if (labels.repo === undefined) labels.repo = repoLabel(root);
  return labels;
}

/** --max-tokens, --max-cost-usd, --max-duration as a RunBudget (0: not given). */
function budgetOf(v: Values): { maxTokens: bigint; maxCostMicros: bigint; maxWallMs: bigint } {
  const tokens = intFlag(v, "max-tokens", 1, Number.MAX_SAFE_INTEGER, "run") ?? 0;
  const usd = str(v, "max-cost-usd");
  if (usd !== undefined && !/^\d+(\.\d{1,6})?$/.test(usd))
    throw new UsageError(
      `--max-cost-usd must be an amount in US dollars such as 2.50 (got ${JSON.stringify(usd)})`,
      "run",
    );
  const duration = str(v, "max-duration");
  const wall = duration === undefined ? undefined : Duration.safeParse(duration);
  if (wall !== undefined && (!wall.success || wall.data === 0))
    throw new UsageError(
      `--max-duration must be a duration such as 90s, 30m or 2h (got ${JSON.stringify(duration)})`,
      "run",
    );
  return {
    maxTokens: BigInt(tokens),
    maxCostMicros: usd === undefined ? 0n : BigInt(Math.round(Number(usd) * 1e6)),
    maxWallMs: BigInt(wall?.success ? wall.data : 0),
  };
}

/** The archive inside CreateRun, or streamed first when large (the SDK's sendWorkspace). */
async function sendWorkspaceOf(
  c: Ctx,
  archive: Uint8Array,
): Promise<{ workspaceTar: Uint8Array } | { workspaceDigest: string }> {
  const t0 = performance.now();
  const sent = await sendWorkspace(c.client, archive, { timeoutMs: 600_000, signal: c.signal });
  if ("workspaceDigest" in sent)
    info(
      `uploaded ${formatBytes(archive.byteLength)} in ${((performance.now() - t0) / 1000).toFixed(1)} s (workspace ${sent.workspaceDigest.slice(0, 12)})`,
    );
  return sent;
}

async function runCmd(c: Ctx): Promise<number> {
  const v = c.values;
  const prompt = str(v, "prompt");
  if (prompt === undefined || prompt.trim() === "")
    throw new UsageError("run needs --prompt TEXT (the task for the agent)", "run");
  const priority = intFlag(v, "priority", 1, 10, "run") ?? 0;
  const maxBytes =
    intFlag(v, "max-workspace-bytes", 1024, Number.MAX_SAFE_INTEGER, "run") ??
    DEFAULT_MAX_WORKSPACE;
  const root = str(v, "repo") ?? process.cwd();
  const follow = v.follow === true;
  const noWait = v["no-wait"] === true;
  const json = v.json === true;

  let packed: Awaited<ReturnType<typeof packWorkspace>>;
  try {
    packed = await packWorkspace({ root, maxBytes });
  } catch (err) {
    if (err instanceof PackError) throw new CliError(err.message);
    throw err;
  }
  const labels = labelsOf(v, root);
  info(
    `packed ${packed.files} file${packed.files === 1 ? "" : "s"}${packed.symlinks > 0 ? ` and ${packed.symlinks} symlinks` : ""} ` +
      `(${formatBytes(packed.contentBytes)}, ${formatBytes(packed.archive.byteLength)} compressed) from ${root} ` +
      `(${packed.source === "git" ? "git ls-files" : ".gitignore rules"})`,
  );
  for (const s of packed.skipped.slice(0, 20)) info(`  left out ${s.path}: ${s.reason}`);
  if (packed.skipped.length > 20) info(`  … and ${packed.skipped.length - 20} more left out`);

  const workspace = await sendWorkspaceOf(c, packed.archive);
  let reused = false;
  const res = await c.client.createRun(
    {
      prompt,
      sessionId: str(v, "session") ?? "",
      priority,
      skills: (v.skill as string[] | undefined) ?? [],
      labels,
      ...workspace,
      idempotencyKey: str(v, "idempotency-key") ?? "",
      budget: budgetOf(v),
      image: str(v, "image") ?? "",
    },
    {
      timeoutMs: 300_000,
      signal: c.signal,
      onHeader: (h) => {
        reused = h.get(RUN_REUSED_HEADER) === "true";
      },
    },
  );
  const run = res.run ?? create(RunSchema);
  c.about.runId = run.runId;
  // On stderr: stdout stays the run id (or its JSON) either way.
  if (reused)
    info(
      `agentctl: reused run ${run.runId}: --idempotency-key ${str(v, "idempotency-key")} already made it (no new run was created)`,
    );
  if (noWait && !follow) {
    stdout.write(
      c.output !== undefined
        ? formatResource(c.output, runResource(run))
        : json
          ? jsonLine(toJson(RunSchema, run))
          : `${run.runId}\n`,
    );
    return EXIT.OK;
  }
  info(
    `run ${run.runId} created (session ${run.sessionId})${noWait ? "; stops at the first approval (--no-wait)" : ""}. Ctrl-C stops waiting, not the run.`,
  );
  const code = await watch(c, run.runId, {
    mode: json ? "json" : follow ? "story" : "quiet",
    // With -o, nobody is asked on stdout: it carries the resource.
    approvals: noWait ? "exit" : json || c.output !== undefined ? "hint" : "prompt",
  });
  if (c.output !== undefined && code !== EXIT.INTERRUPTED) await printRun(c, run.runId);
  return code;
}

/** The run as it is now, in the -o format (after run or wait). */
async function printRun(c: Ctx, runId: string, known?: Run): Promise<void> {
  const run =
    known ??
    (await c.client.getRun({ runId }, { timeoutMs: 30_000, signal: c.signal })).run ??
    create(RunSchema);
  stdout.write(formatResource(c.output as OutputFormat, runResource(run)));
}

async function askOnTerminal(question: string, signal: AbortSignal): Promise<string | undefined> {
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: true });
  rl.on("SIGINT", () => process.emit("SIGINT", "SIGINT"));
  try {
    // readline writes the prompt itself: guarded as stdout's TerminalOut would (its colors).
    return await rl.question(stdoutStyled.guard(question), { signal });
  } catch {
    return undefined;
  } finally {
    rl.close();
  }
}

async function watch(
  c: Ctx,
  runId: string,
  o: {
    mode: "story" | "quiet" | "json";
    approvals: "prompt" | "hint" | "exit" | "none";
    historyOnly?: boolean;
    afterSeq?: bigint;
  },
): Promise<number> {
  // With -o, stdout carries the resource at the end; the rendering goes to stderr.
  const out = c.output === undefined ? stdoutStyled : stderrStyled;
  const tty = out.isTTY === true;
  const interactive = o.approvals === "prompt" && tty && process.stdin.isTTY === true;
  const res = await watchRun({
    client: c.client,
    ep: c.ep,
    runId,
    mode: o.mode,
    out,
    err: stderr,
    color: wantColor(tty),
    live: tty && o.mode !== "json",
    columns: () => out.columns || 80,
    approvals: o.approvals === "prompt" && !interactive ? "hint" : o.approvals,
    signal: c.signal,
    ask: askOnTerminal,
    ...(o.historyOnly === undefined ? {} : { historyOnly: o.historyOnly }),
    ...(o.afterSeq === undefined ? {} : { afterSeq: o.afterSeq }),
  });
  return res.code;
}

// --- runs, get ------------------------------------------------------------------------------

const STATES = ["queued", "running", "paused", "completed", "failed", "cancelled"] as const;

function stateName(s: RunState): string {
  return (RunState[s] ?? "unknown").toLowerCase();
}

function age(run: Run): string {
  const ms = run.createdAt === undefined ? 0 : Date.now() - timestampMs(run.createdAt);
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

async function runsCmd(c: Ctx): Promise<number> {
  const v = c.values;
  const stateArg = str(v, "state");
  let state = RunState.UNSPECIFIED;
  if (stateArg !== undefined) {
    const i = STATES.indexOf(stateArg.toLowerCase() as (typeof STATES)[number]);
    if (i < 0) throw new UsageError(`--state must be one of ${STATES.join(", ")}`, "runs");
    state = (i + 1) as RunState;
  }
  const limit = intFlag(v, "limit", 1, 100_000, "runs") ?? 50;
  let pageToken = str(v, "page-token") ?? "";
  const runs: Run[] = [];
  let next = "";
  for (;;) {
    const res = await c.client.listRuns(
      {
        state,
        sessionId: str(v, "session") ?? "",
        labelSelector: str(v, "selector") ?? "",
        pageSize: Math.min(500, limit - runs.length),
        pageToken,
      },
      { timeoutMs: 30_000, signal: c.signal },
    );
    runs.push(...res.runs);
    next = res.nextPageToken;
    if (next === "" || runs.length >= limit) break;
    pageToken = next;
  }
  const st = makeStyle(wantColor(stdout.isTTY === true));
  if (c.output !== undefined) {
    stdout.write(formatList(c.output, runs.map(runResource), next));
  } else if (v.json === true) {
    for (const r of runs) stdout.write(jsonLine(toJson(RunSchema, r)));
  } else if (runs.length === 0) {
    info("no runs");
  } else {
    stdoutStyled.write(
      `${st.dim(`${"RUN".padEnd(26)}  ${"STATE".padEnd(9)}  ${"CREATED".padEnd(8)}  PROMPT`)}\n`,
    );
    for (const r of runs.map((x) => escapeMessage(RunSchema, x))) {
      const color =
        r.state === RunState.COMPLETED
          ? st.green
          : r.state === RunState.FAILED || r.state === RunState.CANCELLED
            ? st.red
            : r.state === RunState.PAUSED
              ? st.yellow
              : (s: string) => s;
      stdoutStyled.write(
        `${r.runId}  ${color(stateName(r.state).padEnd(9))}  ${age(r).padEnd(8)}  ${r.heldBy === "" ? "" : st.yellow(`(held by ${r.heldBy}) `)}${oneLine(r.prompt, 70)}\n`,
      );
    }
  }
  if (next !== "") {
    const flags = [
      stateArg === undefined ? "" : ` --state ${stateArg}`,
      str(v, "session") === undefined ? "" : ` --session ${str(v, "session")}`,
      ` --limit ${limit}`,
    ].join("");
    info(`more runs: agentctl runs${flags} --page-token ${next}`);
  }
  return EXIT.OK;
}

function showRun(raw: Run): string {
  // Every string of the run escaped before it is laid out (internal/cli/safe-message.ts).
  const r = escapeMessage(RunSchema, raw);
  const st = makeStyle(wantColor(stdout.isTTY === true));
  const t = (x: { seconds: bigint; nanos: number } | undefined) =>
    x === undefined ? "" : new Date(timestampMs(x as never)).toISOString();
  const rows: [string, string][] = [
    ["run", r.runId],
    ["state", stateName(r.state)],
  ];
  if (r.state === RunState.QUEUED && r.queuePosition > 0) {
    rows.push([
      "position",
      `${ordinal(r.queuePosition)} in the queue, ${ordinal(r.sessionPosition)} in its session${r.sessionPosition > 1 ? ` (waits for ${r.sessionPosition - 1} earlier run${r.sessionPosition === 2 ? "" : "s"} of the session)` : ""}`,
    ]);
  }
  if (r.state === RunState.QUEUED && r.heldBy !== "")
    rows.push(["held by", `${st.yellow(r.heldBy)}: ${oneLine(r.heldMessage, 300)}`]);
  if (r.pendingApprovalId !== "")
    rows.push([
      "waiting for",
      `approval ${r.pendingApprovalId} (agentctl approvals --run ${r.runId})`,
    ]);
  rows.push(
    ["tenant", r.tenantId],
    ["session", r.sessionId],
    ["priority", String(r.priority)],
    ["prompt", oneLine(r.prompt, 200)],
  );
  if (r.skills.length > 0) rows.push(["skills", r.skills.join(", ")]);
  const labels = Object.entries(r.labels);
  if (labels.length > 0) rows.push(["labels", labels.map(([k, x]) => `${k}=${x}`).join(" ")]);
  rows.push(["created", t(r.createdAt)]);
  if (r.startedAt) rows.push(["started", t(r.startedAt)]);
  if (r.endedAt) rows.push(["ended", t(r.endedAt)]);
  rows.push(
    ["events", `${r.eventCount} (last seq ${r.lastSeq})`],
    [
      "tool calls",
      `${r.toolCallCount} (${r.approvalCount} approval${r.approvalCount === 1n ? "" : "s"} asked)`,
    ],
  );
  if (r.usage)
    rows.push([
      "tokens",
      `${formatCount(r.usage.inputTokens)} in, ${formatCount(r.usage.outputTokens)} out${r.costMicros > 0n ? ` · ${formatCost(r.costMicros)}` : ""}`,
    ]);
  if (r.workspaceDigest !== "") rows.push(["workspace", `sha256 ${r.workspaceDigest}`]);
  if (r.summary !== "") rows.push(["summary", r.summary]);
  if (r.error) rows.push(["error", `${r.error.code}: ${r.error.message}`]);
  rows.push(["head hash", r.lastHash]);
  return `${rows.map(([k, x]) => `${st.dim(k.padEnd(12))}${x}`).join("\n")}\n`;
}

async function getCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const { run } = await c.client.getRun({ runId }, { timeoutMs: 30_000, signal: c.signal });
  const r = run ?? create(RunSchema);
  // --json is -o json here (the same text).
  const fmt = c.output ?? (c.values.json === true ? ({ kind: "json" } as const) : undefined);
  if (fmt === undefined) stdoutStyled.write(showRun(r));
  else stdout.write(formatResource(fmt, runResource(r)));
  return EXIT.OK;
}

// --- events, replay, verify -----------------------------------------------------------------

async function eventsCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const from = intFlag(c.values, "from-seq", 0, Number.MAX_SAFE_INTEGER, "events") ?? 1;
  const follow = c.values.follow === true;
  const json = c.values.json === true;
  const st = makeStyle(wantColor(stdout.isTTY === true));
  const fmt = c.output;
  // -o: without --follow the events are one list; with it, each one as it comes (kubectl -w).
  const listed: Event[] = [];
  const print = (ev: Event): string => {
    if (fmt === undefined)
      return json
        ? `${safeJson(canonicalJson(toJson(EventSchema, ev)))}\n`
        : `${eventLine(ev, st)}\n`;
    return `${fmt.kind === "yaml" ? "---\n" : ""}${formatResource(fmt, eventResource(ev))}`;
  };
  const res = await followEvents({
    client: c.client,
    runId,
    afterSeq: BigInt(Math.max(0, from - 1)),
    onResync: (why) => {
      // What was printed is not all in the store any more: say so where it was printed
      // (a JSON reader drops every event line before this one), then print the run again.
      info(`agentctl: the stored log lost events already printed (${why}); printing the run again`);
      stdoutStyled.write(
        json
          ? jsonLine({ agentctl: "resync", runId, reason: why })
          : `${st.red(st.bold("‼ resync: the stored log lost events printed above; the run again from seq 1:"))}\n`,
      );
    },
    historyOnly: !follow,
    signal: c.signal,
    onReconnect: (err, attempt) => {
      if (attempt === 1)
        info(`agentctl: lost the event stream (${explainError(err, c.ep)}); reconnecting…`);
    },
    onEvent: async (ev) => {
      if (fmt !== undefined && !follow) listed.push(ev);
      else stdoutStyled.write(print(ev));
      if (follow && ev.payload.case === "runPaused" && ev.payload.value.approvalId !== "") {
        const { run } = await c.client.getRun({ runId }, { timeoutMs: 10_000 });
        if (run?.pendingApprovalId === ev.payload.value.approvalId)
          info(approvalHint(runId, ev.payload.value.approvalId));
      }
      return undefined;
    },
  });
  if (!follow) {
    if (fmt !== undefined) stdout.write(formatList(fmt, listed.map(eventResource)));
    return EXIT.OK;
  }
  // Following ends at the run's end: the exit code says how it ended.
  if (res.last !== undefined && TERMINAL_TYPES.has(res.last.type)) return outcomeCode(res.last);
  const { run } = await c.client.getRun({ runId }, { timeoutMs: 30_000, signal: c.signal });
  return stateCode(run?.state ?? RunState.UNSPECIFIED) ?? EXIT.WAITING;
}

async function waitCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const until = str(c.values, "for") ?? "end";
  if (until !== "end" && until !== "approval")
    throw new UsageError(
      `--for must be end or approval (got ${JSON.stringify(until)})${didYouMean(until, ["end", "approval"])}`,
      "wait",
    );
  const res = await waitRun({
    client: c.client,
    runId,
    until,
    signal: c.signal,
    onReconnect: (err, attempt) => {
      if (attempt === 1)
        info(`agentctl: lost the event stream (${explainError(err, c.ep)}); reconnecting…`);
    },
  });
  const r = res.run;
  if (c.output !== undefined && r !== undefined) await printRun(c, runId, r);
  if (res.code === EXIT.WAITING) {
    if (c.output === undefined) stdout.write(`waiting\n`);
    info(
      res.approvalId === ""
        ? `run ${runId} has not ended (${stateName(r?.state ?? RunState.UNSPECIFIED)})`
        : approvalHint(runId, res.approvalId),
    );
    return res.code;
  }
  const state = stateName(r?.state ?? RunState.UNSPECIFIED);
  if (c.output === undefined) stdout.write(`${state}\n`);
  if (r?.error) info(`run ${runId} ${state}: ${r.error.code}: ${r.error.message}`);
  return res.code;
}

async function replayCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  return watch(c, runId, { mode: "story", approvals: "none", historyOnly: true });
}

async function verifyCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const rawHead = str(c.values, "head");
  const seen = rawHead === undefined ? undefined : parseHead(rawHead);
  const events: Record<string, unknown>[] = [];
  for await (const res of c.client.streamEvents(
    { runId, afterSeq: 0n, historyOnly: true },
    { signal: c.signal },
  )) {
    if (res.event) events.push(toJson(EventSchema, res.event) as Record<string, unknown>);
  }
  const v = verifyChain(events);
  if (!v.ok) {
    stdout.write(`run ${runId}: hash chain BROKEN at seq ${v.seq}: ${v.reason}\n`);
    return EXIT.FAILED;
  }
  if (seen !== undefined) {
    const lost = headVerdict(runId, events, seen);
    if (lost !== undefined) {
      stdout.write(`${lost}\n`);
      return EXIT.FAILED;
    }
  }
  // The chain must also end where the server's projection says the run ends.
  const { run } = await c.client.getRun({ runId }, { timeoutMs: 30_000, signal: c.signal });
  if (run !== undefined && (Number(run.lastSeq) !== v.count || run.lastHash !== v.headHash)) {
    stdout.write(
      `run ${runId}: hash chain BROKEN at seq ${Math.min(v.count, Number(run.lastSeq)) + 1}: the run's head is seq ${run.lastSeq} (hash ${run.lastHash}) but the log served ${v.count} events ending in ${v.headHash}\n`,
    );
    return EXIT.FAILED;
  }
  // A log that records its own loss (log.rewound) is a sound chain but not a whole record.
  const loss = recordedLoss(events);
  if (loss !== undefined) {
    stdout.write(
      `run ${runId}: hash chain OK (${v.count} events, head ${v.headHash}) but the stored log lost events after seq ${loss.storedSeq} (a writer had seen seq ${loss.expectedSeq}; log.rewound at seq ${loss.atSeq})\n`,
    );
    return EXIT.FAILED;
  }
  const held =
    seen === undefined
      ? `; to check later that none of it was lost: --head ${v.count}:${v.headHash}`
      : `; it holds the head you saw, seq ${seen.seq}`;
  stdout.write(`run ${runId}: hash chain OK (${v.count} events, head ${v.headHash})${held}\n`);
  return EXIT.OK;
}

// --- cancel, approvals ------------------------------------------------------------------------

async function cancelCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const { run } = await c.client.cancelRun(
    { runId, reason: str(c.values, "reason") ?? "" },
    { timeoutMs: 30_000, signal: c.signal },
  );
  const state = run?.state ?? RunState.UNSPECIFIED;
  if (c.output !== undefined) {
    await printRun(c, runId, run);
    return EXIT.OK;
  }
  stdout.write(
    state === RunState.CANCELLED
      ? `run ${runId}: cancelled\n`
      : state === RunState.COMPLETED || state === RunState.FAILED
        ? `run ${runId}: already ended (${stateName(state)}); nothing to cancel\n`
        : `run ${runId}: cancel requested (${stateName(state)}); its worker has not stopped it yet (agentctl get ${runId})\n`,
  );
  return EXIT.OK;
}

// --- delete, purge-tenant ---------------------------------------------------------------------

function requiredReason(c: Ctx): string {
  const reason = str(c.values, "reason");
  if (reason === undefined || reason.trim() === "")
    throw new UsageError(
      `${c.spec.name} needs --reason TEXT (why; recorded in the tenant feed)`,
      c.spec.name,
    );
  return reason;
}

async function deleteCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  c.about.runId = runId;
  const reason = requiredReason(c);
  const res = await c.client.deleteRun({ runId, reason }, { timeoutMs: 300_000, signal: c.signal });
  if (c.output !== undefined) {
    const json = toJson(DeleteRunResponseSchema, res);
    stdout.write(formatResource(c.output, { kind: "run", id: runId, json }));
    return EXIT.OK;
  }
  stdout.write(
    res.deletedNow
      ? `run ${runId}: deleted (tenant ${res.tenantId}; ${res.artifactsRemoved} artifact${res.artifactsRemoved === 1n ? "" : "s"} removed)\n`
      : `run ${runId}: already deleted (tenant ${res.tenantId}); nothing left to remove\n`,
  );
  return EXIT.OK;
}

async function purgeTenantCmd(c: Ctx): Promise<number> {
  const tenantId = c.args[0] as string;
  const reason = requiredReason(c);
  let last: PurgeTenantResponse | undefined;
  for await (const p of c.client.purgeTenant({ tenantId, reason }, { signal: c.signal })) {
    last = p;
    if (!p.done && c.output === undefined)
      info(`tenant ${tenantId}: ${p.runsDeleted} runs deleted so far`);
  }
  if (last?.done !== true)
    throw new CliError(`tenant ${tenantId}: the purge stopped before it finished; run it again`);
  if (c.output !== undefined) {
    const json = toJson(PurgeTenantResponseSchema, last);
    stdout.write(formatResource(c.output, { kind: "tenant", id: tenantId, json }));
    return EXIT.OK;
  }
  stdout.write(`tenant ${tenantId}: purged (${last.runsDeleted} runs deleted)\n`);
  return EXIT.OK;
}

function approvalBlock(raw: Approval): string {
  const a = escapeMessage(ApprovalSchema, raw);
  const st = makeStyle(wantColor(stdout.isTTY === true));
  const exp =
    a.expiresAt === undefined
      ? ""
      : ` · expires ${new Date(timestampMs(a.expiresAt)).toISOString()}`;
  const req =
    a.requestedAt === undefined
      ? ""
      : ` · requested ${new Date(timestampMs(a.requestedAt)).toISOString()}`;
  const lines = [
    `${st.yellow("┌")} ${st.bold(a.approvalId)} · run ${a.runId} · ${a.tool}${st.dim(`${req}${exp}`)}`,
    ...formatPreview(raw.preview, st).map((l) => `${st.yellow("│")} ${l}`),
    `${st.yellow("└")} agentctl approve ${a.approvalId} [--rule command|host]   |   agentctl deny ${a.approvalId} --reason "…"`,
  ];
  return `${lines.join("\n")}\n`;
}

async function approvalsCmd(c: Ctx): Promise<number> {
  const runId = str(c.values, "run") ?? "";
  if (runId !== "") c.about.runId = runId;
  const limit = intFlag(c.values, "limit", 1, 100_000, "approvals") ?? 50;
  const out: Approval[] = [];
  let pageToken = "";
  for (;;) {
    const res = await c.client.listApprovals(
      { runId, pageSize: Math.min(500, limit - out.length), pageToken },
      { timeoutMs: 30_000, signal: c.signal },
    );
    out.push(...res.approvals);
    if (res.nextPageToken === "" || out.length >= limit) break;
    pageToken = res.nextPageToken;
  }
  if (c.output !== undefined) {
    stdout.write(formatList(c.output, out.map(approvalResource)));
  } else if (c.values.json === true) {
    for (const a of out) stdout.write(jsonLine(toJson(ApprovalSchema, a)));
  } else if (out.length === 0) {
    info(runId === "" ? "no pending approvals" : `no pending approvals for run ${runId}`);
  } else {
    stdoutStyled.write(out.map(approvalBlock).join("\n"));
  }
  return EXIT.OK;
}

async function resolveCmd(c: Ctx, approve: boolean): Promise<number> {
  const approvalId = c.args[0] as string;
  c.about.approvalId = approvalId;
  const rule = str(c.values, "rule");
  if (rule !== undefined && rule !== "command" && rule !== "host")
    throw new UsageError(
      `--rule must be command or host, not ${JSON.stringify(rule)}`,
      c.spec.name,
    );
  const d = {
    approvalId,
    approve,
    reason: str(c.values, "reason") ?? "",
    ...(rule === undefined ? {} : { rule: rule as "command" | "host" }),
  };
  const approval = await resolve(c.client, d, c.signal);
  const runId = approval?.runId ?? "?";
  if (c.output !== undefined)
    stdout.write(
      formatResource(
        c.output,
        approvalResource(approval ?? create(ApprovalSchema, { approvalId })),
      ),
    );
  else
    stdout.write(
      `${approve ? "approved" : "denied"} ${approvalId} (run ${runId}${approval?.tool ? `, ${approval.tool}` : ""}); the run resumes on a worker\n${rule === undefined ? "" : `a ${rule} rule was proposed: agentctl policy changes --pending (an admin applies it)\n`}`,
    );
  // A decision right after the request may race the worker's pause (internal/cli/approval.ts).
  if (approval !== undefined && mayRace(approval))
    await nudgeResume(c.client, runId, d, { signal: c.signal, budgetMs: 6000 });
  return EXIT.OK;
}

// --- policy changes, apply, reject -----------------------------------------------------------

function policyChangeLine(raw: PolicyChange): string {
  const c = escapeMessage(PolicyChangeSchema, raw);
  const rule =
    c.rule?.kind === ProposedRuleKind.COMMAND
      ? `command "${c.rule.command}" in repo ${c.rule.repo}`
      : `host ${c.rule?.host ?? "?"}`;
  const state = PolicyChangeState[c.state]?.toLowerCase() ?? "?";
  const settled = c.settledBy === "" ? "" : ` by ${c.settledBy}`;
  const file = c.needsTenantFile
    ? `${c.policyFile} (server's: the tenant needs a policy file of its own to apply it)`
    : c.policyFile;
  return `${c.changeId} ${state}${settled} · tenant ${c.tenantId} · ${rule} · proposed by ${c.proposedBy} (${c.approvalId}) · ${file}\n${c.state === PolicyChangeState.PENDING ? c.diff.replace(/^/gm, "    ") : ""}`;
}

async function policyChangesCmd(c: Ctx): Promise<number> {
  const res = await c.client.listPolicyChanges(
    { tenantId: str(c.values, "tenant") ?? "", pendingOnly: c.values.pending === true },
    { timeoutMs: 30_000, signal: c.signal },
  );
  if (c.output !== undefined) {
    stdout.write(formatList(c.output, res.changes.map(policyChangeResource)));
  } else if (res.changes.length === 0) {
    info("no policy changes");
  } else {
    stdout.write(res.changes.map(policyChangeLine).join("\n"));
  }
  return EXIT.OK;
}

async function policyApplyCmd(c: Ctx): Promise<number> {
  const changeId = c.args[0] as string;
  const res = await c.client.applyPolicyChange(
    { changeId },
    { timeoutMs: 60_000, signal: c.signal },
  );
  if (c.output !== undefined && res.change !== undefined) {
    stdout.write(formatResource(c.output, policyChangeResource(res.change)));
    return EXIT.OK;
  }
  stdout.write(
    `${changeId}: applied to ${oneLine(res.change?.policyFile ?? "?", 200)} (tenant ${oneLine(res.change?.tenantId ?? "?", 80)}); policy ${res.newDigest.slice(0, 12)} is in force\n`,
  );
  return EXIT.OK;
}

async function policyRejectCmd(c: Ctx): Promise<number> {
  const changeId = c.args[0] as string;
  const reason = str(c.values, "reason") ?? "";
  const res = await c.client.rejectPolicyChange(
    { changeId, reason },
    { timeoutMs: 30_000, signal: c.signal },
  );
  if (c.output !== undefined && res.change !== undefined) {
    stdout.write(formatResource(c.output, policyChangeResource(res.change)));
    return EXIT.OK;
  }
  stdout.write(`${changeId}: rejected\n`);
  return EXIT.OK;
}

// --- review override ----------------------------------------------------------------------------

/** A person overrides the model reviewer's verdict on a call (OverrideReview). */
async function reviewOverrideCmd(c: Ctx): Promise<number> {
  const target = c.args[0] as string;
  const verdict = str(c.values, "verdict") ?? "";
  const reason = str(c.values, "reason") ?? "";
  const runId = str(c.values, "run") ?? "";
  if (verdict !== "allow" && verdict !== "deny")
    throw new UsageError('--verdict must be "allow" or "deny"', "review override");
  if (reason.trim() === "") throw new UsageError("--reason is required", "review override");
  const byApproval = target.startsWith("apr_");
  if (!byApproval && runId === "")
    throw new UsageError(
      "a call id needs --run RUN (or give the approval id apr_…)",
      "review override",
    );
  const res = await c.client.overrideReview(
    {
      runId,
      verdict,
      reason,
      ...(byApproval ? { approvalId: target } : { callId: target }),
    },
    { timeoutMs: 30_000, signal: c.signal },
  );
  if (c.values.json === true) {
    if (res.override !== undefined)
      stdout.write(jsonLine(toJson(ReviewOverriddenSchema, res.override)));
    return EXIT.OK;
  }
  // What the server says is shown with its control characters escaped (safe-message.ts).
  const o =
    res.override === undefined ? undefined : escapeMessage(ReviewOverriddenSchema, res.override);
  const where =
    res.seq > 0n ? `seq ${res.seq} of the run's log` : "the tenant feed (the run had ended)";
  stdout.write(
    `overridden ${o?.callId ?? escapeControls(target)}: reviewer ${o?.previousVerdict ?? "?"} → ${o?.verdict ?? verdict}, recorded at ${where}\n`,
  );
  if (o?.attention === true)
    stdout.write(
      "ATTENTION: the call the reviewer allowed already ran; its effect is in the run's workspace\n",
    );
  return EXIT.OK;
}

// --- whoami -----------------------------------------------------------------------------------

async function whoamiCmd(c: Ctx): Promise<number> {
  const me = await c.client.whoAmI({}, { timeoutMs: 30_000, signal: c.signal });
  if (c.output !== undefined) {
    stdout.write(formatResource(c.output, principalResource(me)));
    return EXIT.OK;
  }
  const st = makeStyle(wantColor(stdout.isTTY === true));
  const rows: [string, string][] = [
    ["principal", oneLine(me.principal, 200)],
    ["tenant", oneLine(me.tenantId, 200)],
    ["roles", me.roles.map((r) => oneLine(r, 40)).join(", ") || "(none)"],
    ["server", c.ep.url],
  ];
  stdoutStyled.write(`${rows.map(([k, x]) => `${st.dim(k.padEnd(12))}${x}`).join("\n")}\n`);
  return EXIT.OK;
}

// --- policy report ---------------------------------------------------------------------------------

/**
 * The tenant's policy.shadow events since --since (ListRuns, then each run's stored events
 * through StreamEvents), summarised (internal/cli/policy-report.ts).
 */
async function policyReportCmd(c: Ctx): Promise<number> {
  const v = c.values;
  const sinceText = str(v, "since");
  if (sinceText === undefined)
    throw new UsageError("give --since (24h, 7d, or a timestamp)", c.spec.name);
  const sinceMs = parseSince(sinceText, Date.now());
  if (typeof sinceMs === "string") throw new UsageError(sinceMs, c.spec.name);
  const examples = intFlag(v, "examples", 0, 100, c.spec.name) ?? 3;
  const maxRuns = intFlag(v, "max-runs", 1, 1_000_000, c.spec.name) ?? 10_000;
  const only = str(v, "run");
  const runIds: string[] = [];
  let runsNotRead = 0;
  if (only !== undefined) runIds.push(only);
  else {
    let pageToken = "";
    for (;;) {
      const res = await c.client.listRuns(
        { pageSize: 500, pageToken },
        { timeoutMs: 30_000, signal: c.signal },
      );
      for (const r of res.runs) {
        // A run whose last change is older than --since holds no event since then.
        const updated = r.updatedAt === undefined ? Date.now() : timestampMs(r.updatedAt);
        if (updated < sinceMs) continue;
        if (runIds.length < maxRuns) runIds.push(r.runId);
        else runsNotRead++;
      }
      // Past --max-runs the listing goes on (ids only) to say how many were left unread.
      if (res.nextPageToken === "") break;
      pageToken = res.nextPageToken;
    }
  }
  const items: ShadowItem[] = [];
  for (const runId of runIds) {
    c.about.runId = runId;
    // A run deleted since ListRuns named it has nothing left to count (with --run: an error).
    await followEvents({
      client: c.client,
      runId,
      afterSeq: 0n,
      historyOnly: true,
      signal: c.signal,
      onEvent: (ev) => {
        if (ev.payload.case === "policyShadow")
          items.push({
            runId,
            seq: ev.seq,
            tsMs: ev.ts === undefined ? 0 : timestampMs(ev.ts),
            shadow: ev.payload.value,
          });
        return undefined;
      },
    }).catch((err: unknown) => {
      if (only === undefined && err instanceof ConnectError && err.code === Code.NotFound) return;
      throw err;
    });
  }
  const report = summariseShadows(items, { sinceMs, examples, runsNotRead });
  if (v.json === true) stdout.write(jsonLine(report));
  else stdoutStyled.write(renderReport(report, makeStyle(wantColor(stdout.isTTY === true))));
  return EXIT.OK;
}

// --- artifact get -------------------------------------------------------------------------------

async function artifactGetCmd(c: Ctx): Promise<number> {
  const runId = c.args[0] as string;
  const digest = str(c.values, "digest") ?? "";
  const name = str(c.values, "name") ?? (digest === "" ? "patch" : "");
  const outFile = str(c.values, "out");
  c.about.runId = runId;
  c.about.artifact = name || digest;
  const hash = createHash("sha256");
  const chunks: Uint8Array[] = [];
  let meta: { digest: string; size: bigint; mediaType: string; name: string } | undefined;
  for await (const res of c.client.getArtifact({ runId, digest, name }, { signal: c.signal })) {
    if (res.part.case === "info") {
      meta = {
        digest: res.part.value.digest,
        size: res.part.value.sizeBytes,
        mediaType: res.part.value.mediaType,
        name: res.part.value.name,
      };
      if (outFile === undefined && stdout.isTTY === true && !/^text\//.test(meta.mediaType)) {
        throw new CliError(
          `artifact ${meta.name} is ${meta.mediaType} (${formatBytes(Number(meta.size))}); not writing it to a terminal: give --out FILE or redirect stdout`,
          EXIT.USAGE,
        );
      }
    } else if (res.part.case === "chunk") {
      hash.update(res.part.value);
      chunks.push(res.part.value);
    }
  }
  if (meta === undefined) throw new CliError(`the server sent no artifact info for run ${runId}`);
  const data = Buffer.concat(chunks);
  const got = hash.digest("hex");
  if (got !== meta.digest || BigInt(data.byteLength) !== meta.size) {
    throw new CliError(
      `artifact ${meta.name} arrived damaged: sha256 ${got} (${data.byteLength} bytes), expected ${meta.digest} (${meta.size} bytes); try again`,
    );
  }
  if (outFile === undefined) {
    // Byte for byte into a file or pipe (git apply); escaped on a terminal.
    stdout.writeBytes(data);
    return EXIT.OK;
  }
  const tmp = join(dirname(outFile), `.${basename(outFile)}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, outFile);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new CliError(`cannot write ${outFile}: ${(err as Error).message}`);
  }
  info(`wrote ${meta.name} (${formatBytes(data.byteLength)}, sha256 ${meta.digest}) to ${outFile}`);
  return EXIT.OK;
}

/**
 * verify/replay --archive PATH: offline, from a run's archive directory. The archive is
 * verified whole first (internal/archive/open-archive.ts); a bad one exits 1 naming the
 * file and the problem. Then the command runs as usual against the archive's RunService,
 * in process (internal/archive/archive-client.ts).
 */
async function fromArchive(
  spec: CommandSpec,
  parsed: { values: Values; positionals: string[] },
  signal: AbortSignal,
): Promise<number> {
  const path = pathResolve(str(parsed.values, "archive") as string);
  if (parsed.positionals.length > 1)
    throw new UsageError("with --archive give at most the RUN argument", spec.name);
  let archive: OpenedArchive;
  try {
    archive = await openArchive(path);
  } catch (err) {
    if (!(err instanceof ArchiveError)) throw err;
    stdout.write(`${spec.name === "verify" ? "BROKEN: " : ""}${err.message}\n`);
    return EXIT.FAILED;
  }
  const runId = archive.manifest.runId;
  const given = parsed.positionals[0];
  if (given !== undefined && given !== runId)
    throw new UsageError(`the archive holds run ${runId}, not ${given}`, spec.name);
  about.runId = runId;
  info(
    `agentctl: archive ${path}: ${archive.manifest.files.length} files verified against its manifest`,
  );
  const ctx: Ctx = {
    spec,
    values: parsed.values,
    args: [runId],
    ep: { url: `file://${path}`, addrSource: "--addr", token: undefined, tokenSource: undefined },
    client: archiveClient(archive),
    signal,
    about,
    output: outputFormatOf(parsed.values, spec.name),
  };
  return (await HANDLERS[spec.name]?.(ctx)) ?? EXIT.USAGE;
}

const HANDLERS: Record<string, (c: Ctx) => Promise<number>> = {
  run: runCmd,
  runs: runsCmd,
  get: getCmd,
  events: eventsCmd,
  wait: waitCmd,
  replay: replayCmd,
  verify: verifyCmd,
  cancel: cancelCmd,
  delete: deleteCmd,
  "purge-tenant": purgeTenantCmd,
  approvals: approvalsCmd,
  approve: (c) => resolveCmd(c, true),
  deny: (c) => resolveCmd(c, false),
  "review override": reviewOverrideCmd,
  "artifact get": artifactGetCmd,
  "policy changes": policyChangesCmd,
  "policy apply": policyApplyCmd,
  "policy reject": policyRejectCmd,
  "policy report": policyReportCmd,
  whoami: whoamiCmd,
};

// --- entry ------------------------------------------------------------------------------------

const ctl = new AbortController();
let interrupts = 0;
process.on("SIGINT", () => {
  interrupts++;
  if (interrupts > 1) process.exit(EXIT.INTERRUPTED);
  ctl.abort();
});
// A closed pipe (agentctl events RUN | head) ends quietly.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(EXIT.OK);
});

/** Exits once stdout has taken everything (open HTTP/2 sessions would keep us alive). */
function exit(code: number): void {
  stdout.write("", () => process.exit(code));
}

main(process.argv.slice(2), ctl.signal).then(
  (code) => {
    if (code === EXIT.INTERRUPTED) {
      const run = about.runId ?? "RUN";
      info(
        `agentctl: interrupted; the run goes on (agentctl events ${run} --follow to watch it, agentctl cancel ${run} to stop it)`,
      );
    }
    exit(code);
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      info(`agentctl: ${err.message}`);
      info(`Run 'agentctl ${err.command === undefined ? "" : `${err.command} `}--help' for usage.`);
      exit(EXIT.USAGE);
    } else if (err instanceof CliError) {
      info(`agentctl: ${err.message}`);
      exit(err.exitCode);
    } else {
      info(`agentctl: unexpected error: ${(err as Error)?.stack ?? String(err)}`);
      exit(EXIT.ERROR);
    }
  },
);
