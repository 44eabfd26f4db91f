/**
 * The context assembler: turns a run's events into what the model sees, in a
 * provider-neutral shape (`{ system, messages }`) that the engine adapter maps to its SDK.
 *
 * system   = system prompt, then the memory file (AGENTS.md / .agent/memory.md), then the
 *            selected skills.
 * messages = the task (run.queued, always first, even when a checkpoint covers it), the
 *            last checkpoint's summary (replacing the history through its throughSeq),
 *            then the history after it, projected from events:
 *   output.delta (joined per turn) → assistant text; an output.message completes its
 *                                  deltas (adds nothing when it repeats them)
 *   tool.call + its tool.result    → an assistant message with the text said just before
 *                                  and the call, then the call's tool result (errors
 *                                  included: EPOLICY reasons, EAPPROVAL_DENIED, interrupted);
 *                                  a result with parsed tests (ToolResult.tests) shows them
 *                                  first, as text (`testResults`: counts, then each failure
 *                                  with its location and message), then the rest of the output
 *   output.message role "system"   → a user-role notice "[agentd] …"
 *   sandbox.lost                   → a user-role notice: the container was replaced, what
 *                                  was re-applied, which calls' effects are gone
 *                                  (sandbox-lost-notice.ts)
 *   approval.resolved deny without a tool.result yet → the same EAPPROVAL_DENIED result the
 *                                  kernel will append, so the model's view does not change
 *                                  when it lands
 *   a tool.call with no tool.result → left out of messages (a call without a result is
 *                                  invalid for every provider) and listed in `pending`, with
 *                                  whether its tool.started is in the log: the worker settles
 *                                  it (an `interrupted` result for a started one, whatever its
 *                                  approval; continueAfterApproval for an approved one that
 *                                  never started) and re-assembles.
 *
 * Tokens are estimated, not counted: estimateTokens = ceil(UTF-8 bytes / 4), plus 4 per
 * message. The budget covers system + messages; the worker subtracts the tool schemas and
 * the reply's reserve from the model's window before passing it.
 *
 * Never: read files, the event log or the network (everything is input); reorder or
 * invent history beyond the denial projection above; emit a tool call without its result.
 */
import { ApprovalDecision, type Event, type TestSummary } from "../gen/agentd/v1/events_pb.js";
import { testSummaryText } from "../tools/test-results/format-summary.ts";
import { sandboxLostNotice } from "./sandbox-lost-notice.ts";
import { capUtf8, renderSkill, type Skill, tailUtf8 } from "./skills.ts";

export interface ContextToolCall {
  callId: string;
  tool: string;
  /** The call's input, parsed from tool.call input_json (the raw text if it is not JSON). */
  input: unknown;
}

export interface ContextError {
  code: string;
  message: string;
}

/**
 * One message of the provider-neutral history. Structurally the engine port's
 * EngineMessage (port.ts; context.test.ts checks it at compile time), so the worker hands
 * these to the engine as they are.
 */
export type ContextMessage =
  | { role: "user"; text: string }
  /** What the model said in a step: its text and the tool call(s) it made. */
  | { role: "assistant"; text: string; toolCalls?: ContextToolCall[] }
  /** One call's result: `error` set when it failed, was denied or interrupted. */
  | {
      role: "tool";
      callId: string;
      tool: string;
      /** Parsed output_json (long strings cut with a marker); absent when there was none. */
      output?: unknown;
      error?: ContextError;
    };

/** A proposed call whose tool.result is not in the log yet. */
export interface PendingCall {
  callId: string;
  tool: string;
  input: unknown;
  seq: number;
  /**
   * Its tool.started is in the log: its execution began (and may have had its effect, in
   * part or in full). Such a call is never run again.
   */
  started: boolean;
  /** The approval it waits for or had, if any. */
  approval?: { approvalId: string; state: "awaiting" | "approved" | "denied"; reason: string };
}

/** An atomic run of messages: compaction cuts only between units. */
export interface HistoryUnit {
  firstSeq: number;
  lastSeq: number;
  messages: ContextMessage[];
}

export interface History {
  /** The task (run.queued prompt), empty when the log has no run.queued. */
  task: string;
  /** The last checkpoint, if any. */
  checkpoint?: { throughSeq: number; summary: string };
  /** History after the checkpoint, in log order. */
  units: HistoryUnit[];
  pending: PendingCall[];
  lastSeq: number;
}

export interface AssembleInput {
  /** The run's events, in seq order. */
  events: readonly Event[];
  systemPrompt: string;
  /** Selected skills (selectSkills), rendered in this order. */
  skills?: readonly Skill[];
  /** The workspace's memory file, read by the worker: AGENTS.md or .agent/memory.md. */
  memory?: { path: string; content: string };
  /** Budget of the whole context (system + messages) in estimated tokens. */
  budgetTokens: number;
  /** Cap on one tool result's output in the context (the log keeps it whole). 16 KiB. */
  maxToolOutputBytes?: number;
  /** Cap on the memory file's text. 16 KiB. */
  maxMemoryBytes?: number;
}

export interface AssembledContext {
  system: string;
  messages: ContextMessage[];
  pending: PendingCall[];
  /** Estimated tokens of system + messages. */
  tokens: number;
  overBudget: boolean;
  /** throughSeq of the checkpoint in use; 0 when none. */
  checkpointSeq: number;
  /** Seq of the last event seen. */
  lastSeq: number;
}

const DEFAULT_MAX_TOOL_OUTPUT_BYTES = 16 * 1024;
const DEFAULT_MAX_MEMORY_BYTES = 16 * 1024;
/** Estimated per-message overhead (role, separators) in tokens. */
const MESSAGE_OVERHEAD_TOKENS = 4;
/** Event types that do not end an assistant turn (text deltas around them join). */
const TRANSPARENT = new Set([
  "tool.output",
  // The call's execution began: the model sees the call and its result, not when it ran.
  "tool.started",
  // Recorded after each model step, between the step's text and its calls: it must not
  // split them into two messages (a model would see its calls without their preamble,
  // and a replay would no longer match its transcript).
  "usage.updated",
  // What the proxy decided; the model sees the effect in the tool's own output.
  "network.request",
  // The worker's pull of the run's image, before the first step.
  "image.pull",
  // What the setup started from and left: the model is told of the setup by its result.
  "cache.restored",
  "cache.saved",
  "policy.decision",
  "approval.requested",
  "approval.resolved",
  "artifact.emitted",
  "run.cancel_requested",
]);

/** The token estimate used everywhere: UTF-8 bytes / 4, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, "utf8") / 4);
}

/** Estimated tokens of one message, overhead included. */
export function estimateMessageTokens(m: ContextMessage): number {
  let text: string;
  switch (m.role) {
    case "user":
      text = m.text;
      break;
    case "assistant":
      text = `${m.text}${(m.toolCalls ?? []).map((c) => `${c.callId}${c.tool}${JSON.stringify(c.input)}`).join("")}`;
      break;
    case "tool":
      text = `${m.callId}${m.tool}${m.output === undefined ? "" : JSON.stringify(m.output)}${
        m.error === undefined ? "" : `${m.error.code}${m.error.message}`
      }`;
      break;
  }
  return MESSAGE_OVERHEAD_TOKENS + estimateTokens(text);
}

/** Projects the history from events (see the header). Pure. */
export function projectHistory(
  events: readonly Event[],
  opts: { maxToolOutputBytes?: number } = {},
): History {
  const maxOut = opts.maxToolOutputBytes ?? DEFAULT_MAX_TOOL_OUTPUT_BYTES;
  const calls = new Map<string, { seq: number; tool: string; input: unknown }>();
  const results = new Map<string, { seq: number; message: ContextMessage }>();
  const approvals = new Map<string, { approvalId: string; callId: string; seq: number }>();
  const byCall = new Map<string, NonNullable<PendingCall["approval"]> & { seq: number }>();
  const started = new Set<string>();
  let task = "";
  let checkpoint: History["checkpoint"];
  let lastSeq = 0;

  // Pass 1: calls, results, approvals, the task and the last checkpoint, over the whole log.
  for (const ev of events) {
    const seq = Number(ev.seq);
    lastSeq = Math.max(lastSeq, seq);
    const p = ev.payload;
    if (p.case === "runQueued") task = p.value.prompt;
    else if (p.case === "checkpointCreated")
      checkpoint = { throughSeq: Number(p.value.throughSeq), summary: p.value.summary };
    else if (p.case === "toolCall")
      calls.set(p.value.callId, { seq, tool: p.value.tool, input: parseJson(p.value.inputJson) });
    else if (p.case === "toolStarted") started.add(p.value.callId);
    else if (p.case === "toolResult") {
      const call = calls.get(p.value.callId);
      const output = p.value.outputJson === "" ? undefined : parseJson(p.value.outputJson);
      const shown =
        output === undefined
          ? undefined
          : p.value.tests === undefined
            ? capJson(output, maxOut)
            : withTestResults(output, p.value.tests, maxOut);
      results.set(p.value.callId, {
        seq,
        message: {
          role: "tool",
          callId: p.value.callId,
          tool: call?.tool ?? "",
          ...(shown === undefined ? {} : { output: shown }),
          ...(p.value.ok
            ? {}
            : {
                error: {
                  code: p.value.error?.code || "EFAILED",
                  message: p.value.error?.message || "the call failed",
                },
              }),
        },
      });
    } else if (p.case === "approvalRequested") {
      approvals.set(p.value.approvalId, {
        approvalId: p.value.approvalId,
        callId: p.value.callId,
        seq,
      });
      byCall.set(p.value.callId, {
        approvalId: p.value.approvalId,
        state: "awaiting",
        reason: "",
        seq,
      });
    } else if (p.case === "approvalResolved") {
      const a = approvals.get(p.value.approvalId);
      const st = a === undefined ? undefined : byCall.get(a.callId);
      if (st !== undefined && st.approvalId === p.value.approvalId && st.state === "awaiting") {
        st.state = p.value.decision === ApprovalDecision.APPROVE ? "approved" : "denied";
        st.reason = p.value.reason;
        st.seq = seq;
      }
    }
  }

  // Calls without a result: pending for the worker; a denied approval already has its answer.
  const pending: PendingCall[] = [];
  for (const [callId, c] of calls) {
    if (results.has(callId)) continue;
    const a = byCall.get(callId);
    pending.push({
      callId,
      tool: c.tool,
      input: c.input,
      seq: c.seq,
      started: started.has(callId),
      ...(a === undefined
        ? {}
        : { approval: { approvalId: a.approvalId, state: a.state, reason: a.reason } }),
    });
    if (a?.state === "denied") {
      results.set(callId, {
        seq: a.seq,
        message: {
          role: "tool",
          callId,
          tool: c.tool,
          // Exactly what kernel.continueAfterApproval appends for a denial.
          error: {
            code: "EAPPROVAL_DENIED",
            message: `a person denied this call${a.reason ? `: ${a.reason}` : ""}`,
          },
        },
      });
    }
  }

  // Pass 2: the units after the checkpoint. Assistant text stays buffered until the next
  // turn-ending event, so text and the tool call that follows it form one message.
  const after = checkpoint?.throughSeq ?? 0;
  const units: HistoryUnit[] = [];
  let text: { text: string; firstSeq: number; lastSeq: number; final: boolean } | undefined;
  /**
   * The latest contiguous run of deltas (transparent events aside), until an output.message
   * consumes it. An engine may append the step's complete message before or after the
   * step's tool calls: either way it is recognised as a repeat.
   */
  let streamed = "";
  let inDeltas = false;
  const flush = () => {
    if (text !== undefined && text.text !== "")
      units.push({
        firstSeq: text.firstSeq,
        lastSeq: text.lastSeq,
        messages: [{ role: "assistant", text: text.text }],
      });
    text = undefined;
  };
  const pushCall = (callId: string, seq: number) => {
    const c = calls.get(callId);
    const r = results.get(callId);
    if (c === undefined || r === undefined) return flush(); // pending: the worker's
    const said = text?.text ?? "";
    const firstSeq = text?.firstSeq ?? seq;
    text = undefined;
    units.push({
      firstSeq,
      lastSeq: Math.max(r.seq, seq),
      messages: [
        { role: "assistant", text: said, toolCalls: [{ callId, tool: c.tool, input: c.input }] },
        r.message,
      ],
    });
  };
  for (const ev of events) {
    const seq = Number(ev.seq);
    if (seq <= after) continue;
    const p = ev.payload;
    if (p.case === "outputDelta") {
      if (text?.final) flush(); // a new turn after a complete message
      if (!inDeltas) streamed = "";
      inDeltas = true;
      text ??= { text: "", firstSeq: seq, lastSeq: seq, final: false };
      text.text += p.value.text;
      text.lastSeq = seq;
      streamed += p.value.text;
      continue;
    }
    if (TRANSPARENT.has(ev.type)) continue;
    inDeltas = false;
    if (p.case === "outputMessage" && p.value.role !== "system") {
      // The complete message of a step: when it repeats the latest deltas it adds nothing;
      // when those are still buffered it replaces them; otherwise it is a message of its own.
      const all = streamed;
      streamed = "";
      if (all === p.value.text) {
        if (text !== undefined) text.lastSeq = seq;
      } else if (text !== undefined && text.text === all) {
        text = { text: p.value.text, firstSeq: text.firstSeq, lastSeq: seq, final: true };
      } else {
        flush();
        text = { text: p.value.text, firstSeq: seq, lastSeq: seq, final: true };
      }
      if (text !== undefined) text.final = true;
      continue;
    }
    if (p.case === "toolCall") {
      pushCall(p.value.callId, seq);
      continue;
    }
    if (p.case === "toolResult") {
      // A result whose call the checkpoint covered: show the pair here so it stays valid.
      const c = calls.get(p.value.callId);
      if (c !== undefined && c.seq <= after) pushCall(p.value.callId, seq);
      continue;
    }
    flush();
    if (p.case === "outputMessage")
      units.push({
        firstSeq: seq,
        lastSeq: seq,
        messages: [{ role: "user", text: `[agentd] ${p.value.text}` }],
      });
    else if (p.case === "sandboxLost")
      units.push({
        firstSeq: seq,
        lastSeq: seq,
        messages: [{ role: "user", text: `[agentd] ${sandboxLostNotice(p.value, calls)}` }],
      });
  }
  flush();
  return { task, ...(checkpoint === undefined ? {} : { checkpoint }), units, pending, lastSeq };
}

/** The system text: prompt, memory file, skills. */
export function buildSystem(input: Omit<AssembleInput, "events" | "budgetTokens">): string {
  const parts = [input.systemPrompt.trim()];
  if (input.memory !== undefined && input.memory.content.trim() !== "") {
    const max = input.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES;
    const content = input.memory.content.trim();
    const capped = capUtf8(content, max);
    parts.push(
      `# Project memory (${input.memory.path})\n\n${capped}${
        capped.length < content.length ? "\n[… cut by agentd: the file is longer]" : ""
      }`,
    );
  }
  if (input.skills !== undefined && input.skills.length > 0) {
    parts.push(
      `# Skills\n\nFollow these skills where they apply to the task.\n\n${input.skills.map(renderSkill).join("\n")}`,
    );
  }
  return `${parts.filter((p) => p !== "").join("\n\n")}\n`;
}

/** The checkpoint summary as the model sees it. */
export function checkpointMessage(throughSeq: number, summary: string): ContextMessage {
  return {
    role: "user",
    text: `[agentd] The earlier steps of this run (events 1-${throughSeq}) were compacted into this summary:\n\n${summary}`,
  };
}

/** Assembles the context of the next model call. Pure. */
export function assembleContext(input: AssembleInput): AssembledContext {
  const h = projectHistory(input.events, input);
  const system = buildSystem(input);
  const messages: ContextMessage[] = [];
  if (h.task !== "") messages.push({ role: "user", text: h.task });
  if (h.checkpoint !== undefined)
    messages.push(checkpointMessage(h.checkpoint.throughSeq, h.checkpoint.summary));
  for (const u of h.units) messages.push(...u.messages);
  const tokens =
    estimateTokens(system) + messages.reduce((n, m) => n + estimateMessageTokens(m), 0);
  return {
    system,
    messages,
    pending: h.pending,
    tokens,
    overBudget: tokens > input.budgetTokens,
    checkpointSeq: h.checkpoint?.throughSeq ?? 0,
    lastSeq: h.lastSeq,
  };
}

/**
 * A test.run output for the model: `testResults` (the parsed summary as text, at most half
 * the cap) first, then the output without its `tests` (the text says it), cut to the rest.
 */
function withTestResults(output: unknown, tests: TestSummary, maxBytes: number): unknown {
  if (output === null || typeof output !== "object" || Array.isArray(output))
    return capJson(output, maxBytes);
  const text = cutMiddle(testSummaryText(tests), Math.floor(maxBytes / 2));
  const { tests: _, ...rest } = output as Record<string, unknown>;
  const restMax = Math.max(1024, maxBytes - Buffer.byteLength(text) - 32);
  const cut = capJson(rest, restMax);
  return cut !== null && typeof cut === "object"
    ? { testResults: text, ...cut }
    : { testResults: text, output: cut };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * `value` with long strings cut (head and tail kept, a marker between) until its JSON is at
 * most `maxBytes`; the structure stays, so command results keep exitCode next to a cut
 * stdout. Falls back to a cut JSON text when even that does not fit.
 */
export function capJson(value: unknown, maxBytes: number): unknown {
  if (Buffer.byteLength(JSON.stringify(value) ?? "") <= maxBytes) return value;
  for (let limit = Math.floor(maxBytes / 2); limit >= 256; limit = Math.floor(limit / 2)) {
    const cut = mapStrings(value, (s) => cutMiddle(s, limit));
    if (Buffer.byteLength(JSON.stringify(cut)) <= maxBytes) return cut;
  }
  return cutMiddle(JSON.stringify(value), maxBytes);
}

function mapStrings(v: unknown, f: (s: string) => string): unknown {
  if (typeof v === "string") return f(v);
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  if (v !== null && typeof v === "object")
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x, f)]));
  return v;
}

/** At most about `maxBytes` of `s`: its head and tail around a marker naming the cut. */
function cutMiddle(s: string, maxBytes: number): string {
  const size = Buffer.byteLength(s);
  if (size <= maxBytes) return s;
  const half = Math.max(0, Math.floor((maxBytes - 80) / 2));
  const head = capUtf8(s, half);
  const tail = tailUtf8(s, half);
  return `${head}\n[… ${size - Buffer.byteLength(head) - Buffer.byteLength(tail)} bytes cut by agentd …]\n${tail}`;
}
