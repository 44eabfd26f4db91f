/**
 * The renderer of a run's story, shared by `run` (live) and `replay` (the same events give
 * the same lines, live or replayed), plus the one-line-per-event format of `events` and
 * the preview block of `approvals`.
 *
 * Output is deterministic in the events alone (durations come from the events' own
 * timestamps and fields), so `agentctl replay RUN` prints exactly what the live follow
 * printed. On a terminal (`live`), a spinner and a status line (state, elapsed time, the
 * call in progress, the queue position) are redrawn below the story; they are erased
 * before anything else is written and never reach a pipe.
 */
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import { formatBytes } from "../../clients/typescript/src/pack.ts";
import {
  ApprovalDecision,
  Decision,
  type Event,
  EventSchema,
  OutputStream,
  PolicyChangeState,
  type Preview,
  PreviewSchema,
  type SandboxLost,
  type TestSummary,
} from "../gen/agentd/v1/events_pb.js";
import { policyLabel } from "../text/policy-label.ts";
import { failureLine, testCountsText } from "../tools/test-results/format-summary.ts";
import { overrideDetail, overrideLine, verdictDetail, verdictLine } from "./render-review.ts";
import { escapeMessage } from "./safe-message.ts";
import {
  formatCost,
  formatCount,
  formatDuration,
  makeStyle,
  oneLine,
  ordinal,
  type Style,
  stripAnsi,
} from "./style.ts";
import { escapeControls } from "./terminal-safe.ts";

export interface Output {
  /**
   * Text (agentctl's TerminalOut escapes every unsafe character in it, then makes the color
   * marks of style.ts colors).
   */
  write(s: string): unknown;
  /** agentctl's own cursor control (the status line's erase); write() when absent. */
  control?(seq: string): unknown;
}

export interface RendererOptions {
  out: Output;
  color: boolean;
  /** Draw the spinner and status line (a terminal). */
  live?: boolean;
  /** Terminal width, for the status line. */
  columns?: () => number;
  /**
   * Only what needs attention or ends the run: approvals, pauses, artifacts, the outcome
   * (`run` without --follow); the status line still shows progress.
   */
  quiet?: boolean;
}

/** Lines of a diff shown in a preview; the rest is summarised. */
const MAX_DIFF_LINES = 400;
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

function tsMs(ts: Timestamp | undefined): number | undefined {
  return ts === undefined ? undefined : timestampMs(ts);
}

/** A short description of a tool call's input, per tool. */
export function describeCall(tool: string, inputJson: string): string {
  let input: Record<string, unknown>;
  try {
    const v: unknown = JSON.parse(inputJson);
    if (v === null || typeof v !== "object" || Array.isArray(v)) return oneLine(inputJson, 100);
    input = v as Record<string, unknown>;
  } catch {
    return oneLine(inputJson, 100);
  }
  // Escaped: the input's JSON may hold an escape (\u001b, \u202e) that parsing made raw.
  // A line break shows as ⏎: a path or cwd holding one would start a line of its own.
  const str = (k: string): string | undefined =>
    typeof input[k] === "string"
      ? escapeControls(input[k] as string).replace(/\r?\n|\r/g, "⏎")
      : undefined;
  /** A value in JSON quotes (`"a\"b"`), its unsafe characters escaped. */
  const quoted = (k: string): string | undefined =>
    typeof input[k] === "string" ? escapeControls(JSON.stringify(input[k])) : undefined;
  switch (tool) {
    case "repo.read": {
      const r = input.range as { start?: number; end?: number } | undefined;
      return `${str("path") ?? "?"}${r?.start === undefined ? "" : `:${r.start}-${r.end ?? ""}`}`;
    }
    case "repo.search": {
      const globs = Array.isArray(input.globs)
        ? ` in ${oneLine((input.globs as unknown[]).map(String).join(","), 200)}`
        : "";
      return `${quoted("query") ?? '""'}${globs}`;
    }
    case "repo.patch": {
      const edits = Array.isArray(input.edits) ? input.edits.length : 0;
      return `${str("path") ?? "?"} (${edits > 0 ? `${edits} edit${edits === 1 ? "" : "s"}` : "diff"})`;
    }
    case "process.run": {
      const cwd = str("cwd");
      return `$ ${oneLine(str("command") ?? "", 160)}${cwd === undefined ? "" : `  (in ${cwd})`}`;
    }
    case "test.run":
      return quoted("name") ?? "all tests";
    case "lint.run":
      return "";
    default:
      return oneLine(inputJson, 100);
  }
}

/** What starts every line of model text (tool output has `│`). */
const MODEL_GUTTER = "  ▎ ";

const DECISIONS: Record<number, string> = {
  [Decision.AUTO]: "auto",
  [Decision.PREVIEW_AUTO]: "preview, then run",
  [Decision.PREVIEW_APPROVAL]: "needs approval",
  [Decision.DENY]: "denied",
};

/** The lines of a preview box (approval previews here and in `agentctl approvals`). */
export function formatPreview(
  raw: Preview | undefined,
  st: Style,
  opts: { maxDiffLines?: number } = {},
): string[] {
  if (raw === undefined) return ["(no preview)"];
  const p = escapeMessage(PreviewSchema, raw);
  const out: string[] = [];
  // Every row is one line: a line break the model put into a name, a command or a rule
  // shows as ⏎, so nothing it writes starts a line of its own inside the box.
  const row = (text: string) => text.replace(/\r\n|\r|\n/g, "⏎");
  if (p.summary !== "") out.push(st.bold(row(p.summary)));
  if (p.files.length > 0) {
    const stat =
      p.hunks > 0 || p.linesAdded > 0 || p.linesRemoved > 0
        ? `  ${st.green(`+${p.linesAdded}`)} ${st.red(`-${p.linesRemoved}`)} in ${p.hunks} hunk${p.hunks === 1 ? "" : "s"}`
        : "";
    out.push(`files: ${row(p.files.join(", "))}${stat}`);
  }
  // The line as it will run (separators, redirections and all), then its words.
  const line = commandLineOf(raw.summary);
  if (line !== undefined) out.push(`command: ${row(line)}`);
  if (p.argv.length > 0) out.push(row(`argv: [${p.argv.map((a) => `"${a}"`).join(", ")}]`));
  if (p.cwd !== "") out.push(row(`cwd:  ${p.cwd}`));
  if (p.matchedRules.length > 0) out.push(row(`rules: ${p.matchedRules.join(", ")}`));
  if (p.diff !== "") {
    const lines = p.diff.replace(/\n$/, "").split("\n");
    const max = opts.maxDiffLines ?? MAX_DIFF_LINES;
    for (const l of lines.slice(0, max)) {
      if (l.startsWith("+++") || l.startsWith("---")) out.push(st.bold(l));
      else if (l.startsWith("+")) out.push(st.green(l));
      else if (l.startsWith("-")) out.push(st.red(l));
      else if (l.startsWith("@@")) out.push(st.cyan(l));
      else out.push(l);
    }
    if (lines.length > max) out.push(st.dim(`… ${lines.length - max} more diff lines`));
  }
  return out;
}

/** Failures listed under a test result; the rest are counted. */
const MAX_FAILURE_LINES = 10;

/**
 * A test.run result: "✗ test.run  2 failed, 14 passed, 1 skipped (exit 1)", red when a
 * test failed or the command did, then one line per failure (name, file:line, the first
 * line of its message). Every text is from the sandbox: made one line and stripped of
 * control characters (failureLine).
 */
export function testResultLines(
  tool: string,
  t: TestSummary,
  exitCode: number,
  st: Style,
  suffix = "",
): string[] {
  const bad = t.failed > 0 || t.errors > 0 || exitCode !== 0;
  const counts = testCountsText(t);
  const exit = exitCode !== 0 ? ` (exit ${exitCode})` : "";
  const out = [
    `${bad ? st.red("✗") : st.green("✓")} ${tool}  ${bad ? st.red(counts) : st.green(counts)}${exit}${suffix}`,
  ];
  for (const f of t.failures.slice(0, MAX_FAILURE_LINES))
    out.push(`    ${st.red("✗")} ${failureLine(f, 240)}`);
  const more = t.failures.length - Math.min(t.failures.length, MAX_FAILURE_LINES) + t.moreFailures;
  if (more > 0) out.push(st.dim(`    … ${more} more failure${more === 1 ? "" : "s"}`));
  return out;
}

/**
 * The command line of a command's preview, from the kernel's summary `run "LINE" in CWD`
 * (LINE as JSON: the exact line, redacted); undefined for any other summary.
 */
export function commandLineOf(summary: string): string | undefined {
  const m = /^run ("(?:[^"\\]|\\.)*") in /s.exec(summary);
  if (m === null) return undefined;
  try {
    const line: unknown = JSON.parse(m[1] as string);
    return typeof line === "string" ? escapeControls(line) : undefined;
  } catch {
    return undefined;
  }
}

/** One line for one event (the human form of `agentctl events`). */
export function eventLine(raw: Event, st: Style): string {
  const ev = escapeMessage(EventSchema, raw);
  const p = ev.payload;
  // Quoted values: JSON of the raw text (newlines as \n), its unsafe characters escaped.
  const rp = raw.payload;
  const quoted = (s: string): string => escapeControls(JSON.stringify(s));
  const ms = tsMs(ev.ts);
  const time = ms === undefined ? "" : new Date(ms).toISOString().slice(11, 23);
  const head = `${String(ev.seq).padStart(5)}  ${st.dim(time)}  ${ev.type.padEnd(20)}`;
  let detail = "";
  switch (p.case) {
    case "runQueued":
      detail = `prompt="${oneLine(p.value.prompt, 80)}" priority=${p.value.priority}${p.value.workspaceDigest === "" ? "" : ` workspace=${formatBytes(Number(p.value.workspaceSizeBytes))}`}`;
      break;
    case "runStarted":
      detail = `worker=${p.value.workerId} epoch=${p.value.epoch}${p.value.image === "" ? "" : ` image=${p.value.image}`}${p.value.imageDigest === "" ? "" : ` digest=${p.value.imageDigest}`}${p.value.imageReason === "" ? "" : ` (${oneLine(p.value.imageReason, 160)})`}`;
      break;
    case "runResumed":
      detail = `worker=${p.value.workerId} epoch=${p.value.epoch}`;
      break;
    case "runPaused":
      detail = `${p.value.reason}${p.value.approvalId === "" ? "" : ` ${p.value.approvalId}`}`;
      break;
    case "runCompleted":
      detail = oneLine(p.value.summary, 100);
      break;
    case "runFailed":
      detail = `${p.value.error?.code}: ${oneLine(p.value.error?.message ?? "", 100)}`;
      break;
    case "logRewound":
      detail = `LOST EVENTS ${p.value.storedSeq + 1n}..${p.value.expectedSeq} (stored head ${p.value.storedSeq} ${p.value.storedHash.slice(0, 12)}, ${p.value.writer} had seen ${p.value.expectedSeq} ${p.value.expectedHash.slice(0, 12)})`;
      break;
    case "runCancelled":
    case "runCancelRequested":
      detail =
        (rp.case === "runCancelled" || rp.case === "runCancelRequested") && rp.value.reason !== ""
          ? quoted(rp.value.reason)
          : "";
      break;
    case "outputDelta":
      detail = rp.case === "outputDelta" ? quoted(rp.value.text) : "";
      break;
    case "outputMessage":
      detail = `${p.value.role}: ${oneLine(p.value.text, 100)}`;
      break;
    case "toolCall":
      detail = `${p.value.callId} ${p.value.tool} ${describeCall(p.value.tool, p.value.inputJson)}`;
      break;
    case "toolOutput":
      detail = `${p.value.callId} ${p.value.stream === OutputStream.STDERR ? "stderr" : "stdout"} ${rp.case === "toolOutput" ? quoted(rp.value.chunk) : ""}`;
      break;
    case "toolStarted":
      detail = `${p.value.callId}${p.value.workerId === "" ? "" : ` on ${p.value.workerId}`}`;
      break;
    case "toolResult": {
      const v = p.value;
      const status = !v.ok ? `error ${v.error?.code ?? ""}` : v.exitCode !== 0 ? "failed" : "ok";
      const exit = v.exitCode !== 0 ? ` exit ${v.exitCode}` : "";
      const tests = v.tests === undefined ? "" : ` tests: ${testCountsText(v.tests)}`;
      detail = `${v.callId} ${status}${exit}${tests} ${v.durationMs}ms`;
      break;
    }
    case "policyDecision": {
      const by = policyLabel(p.value);
      detail = `${p.value.callId} ${DECISIONS[p.value.decision] ?? "?"} (${p.value.rule})${by === "" ? "" : ` policy=${by}`}`;
      break;
    }
    case "policyShadow": {
      const e = p.value.enforced;
      const c = p.value.candidate;
      const label = c === undefined ? "" : oneLine(policyLabel(c), 120);
      detail = `${p.value.callId} ${DECISIONS[e?.decision ?? 0] ?? "?"} (${oneLine(e?.rule ?? "", 120)}) → candidate ${DECISIONS[c?.decision ?? 0] ?? "?"} (${oneLine(c?.rule ?? "", 120)})${label === "" ? "" : ` policy=${label}`}: ${oneLine(p.value.summary, 80)}`;
      break;
    }
    case "policyChanged":
      detail = `tenant ${p.value.tenantId}: ${p.value.oldDigest.slice(0, 12)} → ${p.value.newDigest.slice(0, 12)} (${policyLabel({ policyDigest: p.value.newDigest, policySource: p.value.source, policyFile: p.value.policyFile })}) by ${p.value.reporter}`;
      break;
    case "policyChangeProposed":
      detail = `${p.value.changeId} by ${p.value.proposedBy} from ${p.value.approvalId}: ${p.value.rule?.command !== "" ? `command "${p.value.rule?.command}" in repo ${p.value.rule?.repo}` : `host ${p.value.rule?.host}`} (${p.value.policyFile}${p.value.needsTenantFile ? ", needs a tenant policy file" : ""})`;
      break;
    case "policyChangeApplied":
      detail = `${p.value.changeId} ${p.value.state === PolicyChangeState.REJECTED ? "rejected" : "applied"} by ${p.value.appliedBy} (proposed by ${p.value.proposedBy})${p.value.newDigest === "" ? "" : ` ${p.value.oldDigest.slice(0, 12)} → ${p.value.newDigest.slice(0, 12)}`}`;
      break;
    case "approvalRequested":
      detail = `${p.value.approvalId} ${p.value.tool}: ${oneLine(p.value.preview?.summary ?? "", 80)}`;
      break;
    case "reviewerVerdict":
      detail = verdictDetail(p.value);
      break;
    case "reviewerOverridden":
      detail = overrideDetail(p.value);
      break;
    case "approvalResolved":
      detail = `${p.value.approvalId} ${p.value.decision === ApprovalDecision.APPROVE ? "approved" : "denied"} by ${p.value.resolvedBy}${rp.case === "approvalResolved" && rp.value.reason !== "" ? `: ${quoted(rp.value.reason)}` : ""}`;
      break;
    case "artifactEmitted":
      detail = `${p.value.name} ${p.value.digest.slice(0, 12)} ${formatBytes(Number(p.value.sizeBytes))}`;
      break;
    case "checkpointCreated":
      detail = `through seq ${p.value.throughSeq}`;
      break;
    case "usageUpdated":
      detail = `${formatCount(p.value.usage?.inputTokens ?? 0n)} tokens in, ${formatCount(p.value.usage?.outputTokens ?? 0n)} out, ${formatCost(p.value.costMicros)} after ${p.value.steps} step(s)`;
      break;
    case "cacheRestored":
      detail = `${p.value.ecosystem} ${p.value.lockfile} (${p.value.reason}) sha256:${p.value.digest.slice(0, 12)} ${formatBytes(Number(p.value.sizeBytes))}, saved by ${p.value.savedByRun}`;
      break;
    case "cacheSaved":
      detail = `${p.value.ecosystem} ${p.value.lockfile} sha256:${p.value.digest.slice(0, 12)} ${formatBytes(Number(p.value.sizeBytes))}${p.value.evicted.length > 0 ? `, ${p.value.evicted.length} evicted` : ""}`;
      break;
    case "networkRequest":
      detail = `${p.value.method} ${p.value.host}:${p.value.port} ${p.value.decision}${p.value.reason === "" ? "" : ` (${p.value.reason})`}, ${formatBytes(Number(p.value.bytesUp))} up, ${formatBytes(Number(p.value.bytesDown))} down`;
      break;
    case "sandboxLost":
      detail = `restored from ${p.value.restoredFromSeq > 0n ? `snapshot seq ${p.value.restoredFromSeq}` : "upload"}; re-applied [${p.value.reappliedCallIds.join(", ")}]; LOST [${p.value.lostCallIds.join(", ")}]${p.value.failsRun ? "; fails the run" : ""}: ${oneLine(p.value.reason, 120)}`;
      break;
    case "imagePull":
      detail = `${p.value.image} ${p.value.phase}${p.value.bytesTotal > 0n ? ` ${formatBytes(Number(p.value.bytesDone))}/${formatBytes(Number(p.value.bytesTotal))}` : ""}${p.value.digest === "" ? "" : ` ${p.value.digest}`}${p.value.reason === "" ? "" : ` (${p.value.reason}: ${p.value.message})`}`;
      break;
    default:
      break;
  }
  return `${head} ${detail}`.trimEnd();
}

interface CallInfo {
  tool: string;
  what: string;
}

export class Renderer {
  readonly #o: Required<Omit<RendererOptions, "columns">> & { columns: () => number };
  readonly #st: Style;
  #atLineStart = true;
  #statusShown = false;
  #timer: NodeJS.Timeout | undefined;
  #frame = 0;
  readonly #startedAt: number;
  /** Text of output.delta events since the last other event. */
  #streamed = "";
  /** The last complete model message. */
  #lastMessage = "";
  readonly #calls = new Map<string, CallInfo>();
  readonly #partial = new Map<string, { stream: OutputStream; text: string }>();
  #queuedAt: number | undefined;
  #state: "queued" | "running" | "paused" | "ended" = "queued";
  #activity = "";
  #queue = "";
  #suspended = false;

  constructor(opts: RendererOptions) {
    this.#o = {
      out: opts.out,
      color: opts.color,
      live: opts.live ?? false,
      quiet: opts.quiet ?? false,
      columns: opts.columns ?? (() => 80),
    };
    this.#st = makeStyle(opts.color);
    this.#startedAt = Date.now();
    if (this.#o.live) {
      this.#timer = setInterval(() => this.#tick(), 100);
      this.#timer.unref();
    }
  }

  // --- low-level output -------------------------------------------------------------

  /** agentctl's own cursor control: never server text. */
  #control(seq: string): void {
    if (this.#o.out.control !== undefined) this.#o.out.control(seq);
    else this.#o.out.write(seq);
  }

  #clearStatus(): void {
    if (this.#statusShown) {
      this.#control("\r\x1b[2K");
      this.#statusShown = false;
    }
  }

  #write(s: string): void {
    if (s === "") return;
    this.#clearStatus();
    this.#o.out.write(s);
    this.#atLineStart = s.endsWith("\n");
  }

  /** One story line, always starting on a fresh line. */
  line(s: string): void {
    this.#write(`${this.#atLineStart ? "" : "\n"}${s}\n`);
    this.#drawStatus();
  }

  /**
   * Model text, as it streams: each of its lines starts with MODEL_GUTTER, so no model line
   * reads as one of agentctl's own (`✔ approved by admin`).
   */
  #modelText(s: string): void {
    let out = "";
    let start = this.#atLineStart;
    for (const part of s.split(/(?<=\n)/)) {
      if (part === "") continue;
      out += (start ? this.#st.dim(MODEL_GUTTER) : "") + part;
      start = part.endsWith("\n");
    }
    this.#text(out);
  }

  /** Text as it comes (model text goes through #modelText). */
  #text(s: string): void {
    this.#write(s);
    this.#drawStatus();
  }

  #tick(): void {
    this.#frame = (this.#frame + 1) % SPINNER.length;
    this.#drawStatus();
  }

  #statusText(): string {
    const st = this.#st;
    const secs = Math.floor((Date.now() - this.#startedAt) / 1000);
    const elapsed =
      secs < 60 ? `${secs}s` : `${Math.floor(secs / 60)}m${String(secs % 60).padStart(2, "0")}s`;
    const spin = st.cyan(SPINNER[this.#frame] as string);
    switch (this.#state) {
      case "queued":
        return `${spin} queued${this.#queue === "" ? "" : ` · ${this.#queue}`} · ${elapsed}`;
      case "paused":
        return `${st.yellow("⏸")} waiting for approval${this.#activity === "" ? "" : ` · ${this.#activity}`} · ${elapsed}`;
      case "running":
        return `${spin} ${this.#activity === "" ? "running" : this.#activity} · ${elapsed}`;
      default:
        return "";
    }
  }

  #drawStatus(): void {
    if (!this.#o.live || this.#suspended || !this.#atLineStart || this.#state === "ended") return;
    const text = this.#statusText();
    if (text === "") return;
    const width = Math.max(20, (this.#o.columns() || 80) - 1);
    let shown = text;
    if (stripAnsi(shown).length > width) shown = `${stripAnsi(shown).slice(0, width - 1)}…`;
    this.#control("\r\x1b[2K");
    this.#o.out.write(shown);
    this.#statusShown = true;
  }

  /** Erases the status line and stops redrawing it (before a prompt). */
  suspend(): void {
    this.#clearStatus();
    this.#suspended = true;
  }

  resume(): void {
    this.#suspended = false;
    this.#drawStatus();
  }

  /** The queue position shown while queued ("2nd in queue, 1st in its session"). */
  setQueuePosition(queue: number, session: number): void {
    this.#queue =
      queue > 0
        ? `${ordinal(queue)} in queue${session > 1 ? `, ${ordinal(session)} in its session` : ""}`
        : "";
    this.#drawStatus();
  }

  /** Stops the status line for good and ends the last line. */
  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#clearStatus();
    if (!this.#atLineStart) this.#write("\n");
  }

  // --- events -----------------------------------------------------------------------

  #flushPartial(callId: string): void {
    const p = this.#partial.get(callId);
    if (p !== undefined && p.text !== "") this.#outputLine(p.stream, p.text);
    this.#partial.delete(callId);
  }

  #outputLine(stream: OutputStream, text: string): void {
    const bar = stream === OutputStream.STDERR ? this.#st.yellow("  ┊ ") : this.#st.dim("  │ ");
    this.line(`${bar}${text}`);
  }

  event(raw: Event): void {
    // Every string of the event escaped before any of it is laid out (safe-message.ts).
    const ev = escapeMessage(EventSchema, raw);
    const st = this.#st;
    const p = ev.payload;
    const quiet = this.#o.quiet;
    // Tokens so far: the outcome line says them, so nothing to tell a person here. It comes
    // between a step's streamed text and its output.message, which must still see the text
    // as streamed (else the message is printed twice).
    if (p.case === "usageUpdated") return;
    // A call's execution began: the call's line said what runs, its result line will say how
    // it went. Nothing for a person in between (the record is for a worker taking over).
    if (p.case === "toolStarted") return;
    if (p.case === "imagePull" && p.value.phase === "progress") {
      this.#activity = `pulling ${p.value.image}`;
      this.#drawStatus();
      return;
    }
    if (p.case !== "outputDelta") {
      // Model text stays a paragraph of its own.
      if (this.#streamed !== "" && !this.#atLineStart) this.#text("\n");
    }
    switch (p.case) {
      case "runQueued": {
        this.#queuedAt = tsMs(ev.ts);
        const v = p.value;
        const ws =
          v.workspaceDigest === ""
            ? "no workspace"
            : `workspace ${formatBytes(Number(v.workspaceSizeBytes))}`;
        const skills = v.skills.length > 0 ? ` · skills ${v.skills.join(", ")}` : "";
        this.line(
          `${st.bold("●")} run ${st.bold(ev.runId)} queued · priority ${v.priority} · ${ws}${skills}`,
        );
        if (!quiet) this.line(st.dim(`  ${oneLine(v.prompt, 200)}`));
        break;
      }
      case "runStarted":
        this.#state = "running";
        this.#activity = "thinking";
        if (!quiet)
          this.line(
            `${st.green("▶")} started on ${p.value.workerId}${p.value.image === "" ? "" : ` · ${p.value.image}`}${p.value.imageDigest === "" ? "" : ` (${p.value.imageDigest.slice(0, 19)})`}${p.value.imageReason === "" ? "" : st.dim(` (${oneLine(p.value.imageReason, 160)})`)}`,
          );
        break;
      case "runResumed":
        this.#state = "running";
        this.#activity = "thinking";
        if (!quiet) this.line(`${st.green("▶")} resumed on ${p.value.workerId}`);
        break;
      case "runPaused":
        this.#state = "paused";
        this.#activity = p.value.approvalId;
        this.line(
          `${st.yellow("⏸")} paused: ${p.value.reason === "approval" ? `waiting for approval ${p.value.approvalId}` : p.value.reason}`,
        );
        break;
      case "outputDelta":
        this.#activity = "writing";
        if (!quiet) this.#modelText(p.value.text);
        this.#streamed += p.value.text;
        return;
      case "outputMessage":
        if (!quiet && p.value.text !== this.#streamed && p.value.text !== "") {
          const lines = p.value.text.replace(/\n$/, "").split("\n");
          this.line(lines.map((l) => `${this.#st.dim(MODEL_GUTTER)}${l}`).join("\n"));
        }
        this.#lastMessage = p.value.text;
        break;
      case "toolCall": {
        const what = describeCall(p.value.tool, p.value.inputJson);
        this.#calls.set(p.value.callId, { tool: p.value.tool, what });
        this.#activity = `${p.value.tool} ${oneLine(what, 60)}`.trim();
        if (!quiet) this.line(`${st.cyan("→")} ${st.bold(p.value.tool)} ${what}`.trimEnd());
        break;
      }
      case "toolOutput": {
        if (quiet) break;
        const v = p.value;
        let buf = this.#partial.get(v.callId);
        if (buf !== undefined && buf.stream !== v.stream) {
          this.#flushPartial(v.callId);
          buf = undefined;
        }
        const text = (buf?.text ?? "") + v.chunk;
        const lines = text.split("\n");
        const rest = lines.pop() ?? "";
        for (const l of lines) this.#outputLine(v.stream, l.replace(/\r$/, ""));
        this.#partial.set(v.callId, { stream: v.stream, text: rest });
        break;
      }
      case "toolResult": {
        const v = p.value;
        this.#flushPartial(v.callId);
        const call = this.#calls.get(v.callId);
        this.#activity = "thinking";
        if (quiet) break;
        const dur = v.durationMs > 0n ? ` ${st.dim(formatDuration(Number(v.durationMs)))}` : "";
        // A command's exit code, when it ran (a refused call has none).
        const exit =
          call !== undefined &&
          /^(process|test|lint)\.run$/.test(call.tool) &&
          (v.error === undefined || v.exitCode !== 0)
            ? ` exit ${v.exitCode}`
            : "";
        const extra = `${v.truncated ? " (output truncated)" : ""}`;
        if (v.ok && v.tests !== undefined) {
          const lines = testResultLines(
            call?.tool ?? v.callId,
            v.tests,
            v.exitCode,
            st,
            `${dur}${extra}`,
          );
          for (const l of lines) this.line(`  ${l}`);
        } else if (v.ok && v.exitCode !== 0) {
          // A command that failed is a failure, whatever the call's own status says.
          this.line(`  ${st.red("✗")} ${call?.tool ?? v.callId}${exit}${dur}${extra}`);
        } else if (v.ok) {
          this.line(`  ${st.green("✓")} ${call?.tool ?? v.callId}${exit}${dur}${extra}`);
        } else {
          const err =
            v.error === undefined ? "" : `: ${v.error.code} ${oneLine(v.error.message, 300)}`;
          this.line(`  ${st.red("✗")} ${call?.tool ?? v.callId}${exit}${err}${dur}${extra}`);
        }
        break;
      }
      case "policyDecision": {
        const v = p.value;
        if (quiet || v.decision === Decision.AUTO) break;
        const trust =
          v.trustAdjustments.length > 0 ? ` [trust: ${v.trustAdjustments.join(", ")}]` : "";
        // The reason often names the rule already.
        const rule = v.rule === "" || v.reason.includes(v.rule) ? "" : ` (${v.rule})`;
        // Which policy decided (source, file, digest): what policy.changed and diff name.
        const label = policyLabel(v);
        const by = label === "" ? "" : st.dim(` [policy: ${label}]`);
        if (v.decision === Decision.DENY) {
          this.line(`  ${st.red("⛔ denied by policy")}${rule}: ${v.reason}${trust}${by}`);
        } else if (v.decision === Decision.PREVIEW_APPROVAL) {
          this.line(`  ${st.yellow("policy: needs approval")}${rule}: ${v.reason}${trust}${by}`);
        } else {
          this.line(st.dim(`  policy: ${DECISIONS[v.decision] ?? "?"}${rule}${trust}${by}`));
        }
        break;
      }
      case "approvalRequested": {
        const v = p.value;
        const exp = tsMs(v.expiresAt);
        this.line(
          `  ${st.yellow("┌")} ${st.bold(st.yellow("approval needed"))} ${v.approvalId} · ${v.tool}${exp === undefined ? "" : st.dim(` · expires ${new Date(exp).toISOString().replace(/\.\d+Z$/, "Z")}`)}`,
        );
        for (const l of formatPreview(v.preview, st)) this.line(`  ${st.yellow("│")} ${l}`);
        this.line(`  ${st.yellow("└")}`);
        break;
      }
      case "reviewerVerdict":
        this.line(verdictLine(p.value, st));
        break;
      case "reviewerOverridden":
        this.line(overrideLine(p.value, st));
        break;
      case "approvalResolved": {
        const v = p.value;
        const ok = v.decision === ApprovalDecision.APPROVE;
        const by = v.resolvedBy === "expiry" ? "expired" : `by ${v.resolvedBy || "?"}`;
        const reason = v.reason === "" ? "" : `: ${v.reason}`;
        this.line(
          ok
            ? `  ${st.green("✔ approved")} ${v.approvalId} ${by}${reason}`
            : `  ${st.red("✘ denied")} ${v.approvalId} ${by}${reason}`,
        );
        break;
      }
      case "artifactEmitted": {
        const v = p.value;
        if (v.name === "workspace-snapshot") {
          if (!quiet)
            this.line(
              st.dim(
                `  ◇ workspace snapshot ${formatBytes(Number(v.sizeBytes))} ${v.digest.slice(0, 12)}`,
              ),
            );
          break;
        }
        this.line(
          `${st.magenta("◆")} artifact ${st.bold(v.name)} ${formatBytes(Number(v.sizeBytes))} · sha256 ${v.digest.slice(0, 12)} · agentctl artifact get ${ev.runId}${v.name === "patch" ? " --out fix.patch" : ` --name ${v.name}`}`,
        );
        break;
      }
      case "checkpointCreated":
        if (!quiet) this.line(st.dim(`  ◇ context compacted through seq ${p.value.throughSeq}`));
        break;
      case "runCancelRequested":
        this.line(
          `${st.yellow("■")} cancel requested${p.value.requestedBy === "" ? "" : ` by ${p.value.requestedBy}`}${p.value.reason === "" ? "" : `: ${p.value.reason}`}`,
        );
        this.#activity = "stopping";
        break;
      case "runCompleted": {
        const v = p.value;
        this.#state = "ended";
        const usage = v.usage
          ? ` · ${formatCount(v.usage.inputTokens)} tokens in, ${formatCount(v.usage.outputTokens)} out`
          : "";
        const cost = v.costMicros > 0n ? ` · ${formatCost(v.costMicros)}` : "";
        this.line(`${st.green(st.bold("✔ completed"))}${this.#took(ev)}${usage}${cost}`);
        if (v.summary !== "" && (quiet || v.summary !== this.#lastMessage)) {
          for (const l of v.summary.replace(/\n$/, "").split("\n")) this.line(`  ${l}`);
        }
        if (v.patchRedacted)
          this.line(
            st.yellow(
              `  ! the patch was redacted: secret values replaced by [REDACTED]${v.patchRedactedFiles.length > 0 ? ` in ${v.patchRedactedFiles.join(", ")}` : ""}`,
            ),
          );
        for (const o of v.patchOmitted)
          this.line(st.dim(`  ◇ left out of the patch: ${o.path} (${o.reason})`));
        break;
      }
      case "runFailed": {
        const v = p.value;
        this.#state = "ended";
        this.line(
          `${st.red(st.bold("✘ failed"))}${this.#took(ev)}: ${v.error?.code ?? "?"}: ${v.error?.message ?? ""}`,
        );
        break;
      }
      case "runCancelled": {
        const v = p.value;
        this.#state = "ended";
        this.line(
          `${st.red(st.bold("✘ cancelled"))}${this.#took(ev)}${v.cancelledBy === "" ? "" : ` by ${v.cancelledBy}`}${v.reason === "" ? "" : `: ${v.reason}`}`,
        );
        break;
      }
      case "logRewound": {
        // Always shown, quiet or not: the log itself says it is missing events.
        const v = p.value;
        this.line(
          st.red(
            st.bold(
              `‼ the stored log lost events ${v.storedSeq + 1n}..${v.expectedSeq}: ${v.writer} had seen seq ${v.expectedSeq}, the store holds up to ${v.storedSeq}; what they recorded is gone`,
            ),
          ),
        );
        break;
      }
      case "cacheRestored":
        if (!quiet)
          this.line(
            st.dim(
              `  ◇ ${p.value.ecosystem} cache restored for ${p.value.lockfile} (${p.value.reason}) ${formatBytes(Number(p.value.sizeBytes))}, saved by ${p.value.savedByRun}`,
            ),
          );
        break;
      case "cacheSaved":
        if (!quiet)
          this.line(
            st.dim(
              `  ◇ ${p.value.ecosystem} cache saved for ${p.value.lockfile} ${formatBytes(Number(p.value.sizeBytes))}`,
            ),
          );
        break;
      case "networkRequest": {
        const v = p.value;
        if (quiet) break;
        const text = `  ⇄ ${v.method} ${v.host}:${v.port} ${v.decision}${v.reason === "" ? "" : ` (${v.reason})`}`;
        this.line(v.decision === "allowed" ? st.dim(text) : st.yellow(text));
        break;
      }
      case "imagePull": {
        const v = p.value;
        if (v.phase === "failed")
          this.line(
            `  ${st.red("✗")} pulling ${v.image} failed: ${v.reason}: ${oneLine(v.message, 200)}`,
          );
        else if (!quiet)
          this.line(
            st.dim(
              `  ◇ image ${v.image} ${v.phase === "done" ? `pulled ${v.digest}` : "pulling"}`.trimEnd(),
            ),
          );
        break;
      }
      case "sandboxLost":
        // Never quiet: a person must see that the workspace was replaced and what is gone.
        for (const l of this.#sandboxLostLines(p.value)) this.line(l);
        break;
      default:
        // An event this agentctl does not know (a newer server): its type says what it is.
        if (!quiet) this.line(st.dim(`  (${ev.type})`));
        break;
    }
    this.#streamed = "";
  }

  #sandboxLostLines(v: SandboxLost): string[] {
    const st = this.#st;
    const from =
      v.restoredFromSeq > 0n ? `the snapshot at event ${v.restoredFromSeq}` : "the upload";
    const out = [
      `${st.yellow(st.bold("⚠ sandbox lost"))}: ${oneLine(v.reason, 200)}`,
      `  workspace restored from ${from}${v.reappliedCallIds.length > 0 ? `; re-applied ${v.reappliedCallIds.join(", ")}` : ""}`,
    ];
    for (const id of v.lostCallIds) {
      const c = this.#calls.get(id);
      out.push(
        `  ${st.red(st.bold("✗ lost"))} ${id}${c === undefined ? "" : ` ${c.tool} ${c.what}`}: its effects are gone`,
      );
    }
    if (v.lostCallIds.length === 0) out.push("  nothing recorded was lost");
    if (v.failsRun) out.push(`  ${st.red("the run fails (policy sandbox.onLost: fail)")}`);
    return out;
  }

  #took(ev: Event): string {
    const end = tsMs(ev.ts);
    return this.#queuedAt === undefined || end === undefined
      ? ""
      : ` in ${formatDuration(end - this.#queuedAt)}`;
  }
}
