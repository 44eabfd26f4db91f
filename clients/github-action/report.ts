/**
 * A run's story for the job summary, read from its events as `agentctl events RUN --json`
 * prints them (canonical protobuf-JSON, one a line): each tool call with the kernel's
 * decision, the person's answer and the result, and how the run ended.
 *
 * Must never: trust a line's shape (a field of the wrong type is read as absent), or make
 * any of this text safe for Markdown: that is summary.ts's job.
 */

export interface CallRow {
  callId: string;
  tool: string;
  /** What the call does, in short (a path, a command), raw text from the model. */
  gist: string;
  /** "auto", "preview, then run", "needs approval", "denied", or "" before a decision. */
  decision: string;
  rule: string;
  /** The kernel's reason (a deny's is what the model was told). */
  reason: string;
  /** The approval, once asked: its id, and the answer once given. */
  approval?: { id: string; answer: string; by: string; reason: string };
  /** "ok", "exit 2", "error: CODE message", or "" while it has no result. */
  result: string;
  tests?: string;
}

export interface RunReport {
  prompt: string;
  calls: CallRow[];
  /** The last event's type ("run.completed" …). */
  lastType: string;
  /** run.completed's summary (the model's last message). */
  summary: string;
  /** run.failed's error, or run.cancelled's reason. */
  error: string;
  patchDigest: string;
  /** The approval a paused run waits for. */
  pendingApproval?: { id: string; tool: string; preview: string };
  usage: { input: number; output: number; costMicros: number };
  events: number;
}

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}
function s(v: unknown): string {
  return typeof v === "string" ? v : "";
}
function n(v: unknown): number {
  const x = typeof v === "string" || typeof v === "number" ? Number(v) : 0;
  return Number.isFinite(x) ? x : 0;
}

const DECISIONS: Record<string, string> = {
  DECISION_AUTO: "auto",
  DECISION_PREVIEW_AUTO: "preview, then run",
  DECISION_PREVIEW_APPROVAL: "needs approval",
  DECISION_DENY: "denied",
};

/** What a call does, in short: the path, the command, the test name… */
export function gistOf(tool: string, inputJson: string): string {
  let input: Obj;
  try {
    input = obj(JSON.parse(inputJson));
  } catch {
    return inputJson;
  }
  switch (tool) {
    case "repo.read":
    case "repo.patch":
      return s(input.path) || inputJson;
    case "repo.search":
      return s(input.query);
    case "process.run":
      return `$ ${s(input.command)}`;
    case "test.run":
      return s(input.name) || "all tests";
    default:
      return Object.keys(input).length === 0 ? "" : inputJson;
  }
}

function resultOf(v: Obj): string {
  const err = obj(v.error);
  if (s(err.code) !== "" || s(err.message) !== "")
    return `error: ${[s(err.code), s(err.message)].filter((x) => x !== "").join(" ")}`;
  if (v.exitCode !== undefined && n(v.exitCode) !== 0) return `exit ${n(v.exitCode)}`;
  return v.ok === true ? "ok" : "not ok";
}

function testsOf(v: Obj): string | undefined {
  const t = obj(v.tests);
  if (Object.keys(t).length === 0) return undefined;
  return `${n(t.passed)} passed, ${n(t.failed)} failed, ${n(t.skipped)} skipped`;
}

function newReport(): RunReport {
  return {
    prompt: "",
    calls: [],
    lastType: "",
    summary: "",
    error: "",
    patchDigest: "",
    usage: { input: 0, output: 0, costMicros: 0 },
    events: 0,
  };
}

/** Folds one event into the report. */
function apply(r: RunReport, ev: Obj, rows: Map<string, CallRow>): void {
  const row = (callId: string): CallRow | undefined => rows.get(callId);
  r.events++;
  r.lastType = s(ev.type) || r.lastType;
  const usage = (u: unknown, cost: unknown): void => {
    const x = obj(u);
    r.usage = { input: n(x.inputTokens), output: n(x.outputTokens), costMicros: n(cost) };
  };
  if (ev.runQueued !== undefined) r.prompt = s(obj(ev.runQueued).prompt);
  const call = obj(ev.toolCall);
  if (ev.toolCall !== undefined) {
    const c: CallRow = {
      callId: s(call.callId),
      tool: s(call.tool),
      gist: gistOf(s(call.tool), s(call.inputJson)),
      decision: "",
      rule: "",
      reason: "",
      result: "",
    };
    r.calls.push(c);
    rows.set(c.callId, c);
  }
  const pd = obj(ev.policyDecision);
  const decided = row(s(pd.callId));
  if (decided !== undefined) {
    decided.decision = DECISIONS[s(pd.decision)] ?? s(pd.decision);
    decided.rule = s(pd.rule);
    decided.reason = s(pd.reason);
  }
  const ar = obj(ev.approvalRequested);
  if (ev.approvalRequested !== undefined) {
    const asked = row(s(ar.callId));
    if (asked !== undefined)
      asked.approval = { id: s(ar.approvalId), answer: "", by: "", reason: "" };
    r.pendingApproval = {
      id: s(ar.approvalId),
      tool: s(ar.tool),
      preview: s(obj(ar.preview).summary),
    };
  }
  const res = obj(ev.approvalResolved);
  if (ev.approvalResolved !== undefined) {
    const answer = s(res.decision) === "APPROVAL_DECISION_APPROVE" ? "approved" : "denied";
    for (const c of r.calls) {
      if (c.approval?.id === s(res.approvalId))
        c.approval = { id: c.approval.id, answer, by: s(res.resolvedBy), reason: s(res.reason) };
    }
    if (r.pendingApproval?.id === s(res.approvalId)) delete r.pendingApproval;
  }
  const tr = obj(ev.toolResult);
  const done = row(s(tr.callId));
  if (ev.toolResult !== undefined && done !== undefined) {
    done.result = resultOf(tr);
    const t = testsOf(tr);
    if (t !== undefined) done.tests = t;
  }
  if (ev.usageUpdated !== undefined)
    usage(obj(ev.usageUpdated).usage, obj(ev.usageUpdated).costMicros);
  const rc = obj(ev.runCompleted);
  if (ev.runCompleted !== undefined) {
    r.summary = s(rc.summary);
    r.patchDigest = s(rc.patchDigest);
    usage(rc.usage, rc.costMicros);
  }
  if (ev.runFailed !== undefined) {
    const e = obj(obj(ev.runFailed).error);
    r.error = [s(e.code), s(e.message)].filter((x) => x !== "").join(": ");
    usage(obj(ev.runFailed).usage, obj(ev.runFailed).costMicros);
  }
  if (ev.runCancelled !== undefined) {
    const c = obj(ev.runCancelled);
    r.error = `cancelled${s(c.cancelledBy) === "" ? "" : ` by ${s(c.cancelledBy)}`}${s(c.reason) === "" ? "" : `: ${s(c.reason)}`}`;
  }
}

/** The report of the NDJSON `text`; lines that are not JSON objects are skipped. */
export function readReport(text: string): RunReport {
  const r = newReport();
  const rows = new Map<string, CallRow>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let ev: unknown;
    try {
      ev = JSON.parse(line);
    } catch {
      continue;
    }
    apply(r, obj(ev), rows);
  }
  return r;
}
