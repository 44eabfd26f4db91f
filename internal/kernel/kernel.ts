/**
 * The kernel: the only path from a proposed tool call to an effect.
 *
 *   validate → jail → risk profile → decision → tool.call + policy.decision (+ tool.started
 *   when no person is asked) → [preview → approval → tool.started] → resolve secrets
 *   → gate → execute in the sandbox → redact → fit one event → tool.result
 *
 * Every step that matters is an event (appended with the run owner's fencing token before
 * the next step runs) and the decision is an OpenTelemetry span. The kernel is total: every
 * call ends in policy.decision and a typed tool.result (or an approval and a pause),
 * whatever its input; only the event log's own errors (EFENCED, EREWOUND, EUNAVAILABLE, ECONFLICT…)
 * escape, because the worker must act on them. Every event it appends is measured to fit
 * the log's size limit. It must never: run a tool the decision did not allow, run a call
 * whose input the log does not hold as it ran, start a call before the log acknowledged its
 * tool.started (the record a taker reads to never run it twice), put a secret value into an
 * event, a log or a span, or return unbounded output.
 */

import { create } from "@bufbuild/protobuf";
import { type Span, SpanStatusCode } from "@opentelemetry/api";
import type { LanguageModel } from "ai";
import type { ArtifactStore } from "../artifacts/port.ts";
import { isAgentdError } from "../errors.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import {
  ApprovalRequestedSchema,
  ArtifactEmittedSchema,
  Decision as DecisionEnum,
  PolicyDecisionSchema,
  type Preview,
  PreviewSchema,
  RiskProfileSchema,
  RunPausedSchema,
  ToolCallSchema,
  ToolResultSchema,
  ToolStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { OWNER_CHANGED, type SandboxHandle } from "../sandbox/port.ts";
import { observeToolResult } from "../telemetry/event-metrics.ts";
import { inSpan, tracer } from "../telemetry/tracing.ts";
import { pickCommands, type RunCommands } from "../tools/command-spec.ts";
import { toolByName } from "../tools/registry.ts";
import { planPatch } from "../tools/repo-patch.ts";
import type { ToolContext, ToolLimits } from "../tools/tool.ts";
import { approvalTicket } from "./approval-ticket.ts";
import { type ApprovedScope, commandLineOf } from "./approved-commands.ts";
import { recordCallInput } from "./call-input-record.ts";
import { type ControlPath, type Decision, decide } from "./decide.ts";
import { decisionProvenance } from "./decision-provenance.ts";
import { traceDecision } from "./decision-span.ts";
import { EVENT_BUDGET, fitDocument } from "./event-fit.ts";
import { clipText } from "./head-tail.ts";
import { type NameKey, nameKey } from "./held-names.ts";
import { createLiveOutput } from "./live-output.ts";
import type { Policy } from "./policy-schema.ts";
import { applyProvenance } from "./provenance.ts";
import { createRedactor, type Redactor } from "./redaction.ts";
import { applyReplacing, needsReplacingProbe, probeReplacing } from "./replace-probe.ts";
import { envelopeResult, testSummaryOf } from "./result-envelope.ts";
import { askReviewer } from "./reviewer/ask-reviewer.ts";
import { type Assessment, assess, type CompiledRisk, compileRisk } from "./risk.ts";
import type { RunWriter } from "./run-writer.ts";
import { RUNNER_TOOLS, runsRunner } from "./runner-files.ts";
import { scanRunnerTrees, type TreeScan, treeChanges } from "./runner-trees.ts";
import { type BaseIndex, changedSinceUpload } from "./script-probe.ts";
import { containCall, guardTaint, heldPatchPreview, previewTaint } from "./secret-containment.ts";
import type { TaintedFile } from "./secret-taint.ts";
import type { SecretProvider } from "./secrets.ts";
import { createSecretResolver } from "./secrets.ts";
import { candidateDecision, decisionsDiffer, type ProbeFacts } from "./shadow-decision.ts";
import { countShadow, type ShadowRecord, shadowEvent } from "./shadow-record.ts";
import { withReviewerGate } from "./shadow-reviewer-gate.ts";
import { WALL_BUDGET_ERROR, WALL_BUDGET_REASON } from "./stop-reason.ts";
import type { TrustCounters } from "./trust.ts";

/** The run a call belongs to, and the owner's right to write its log. */
export interface KernelRun {
  runId: string;
  sessionId: string;
  /** The run's repository (its `repo` label, "default" without one): approvedCommands scope. */
  repo?: string;
  /** The owner's lease epoch: every append carries it (a stale owner is refused). */
  fence: number;
  sandbox: SandboxHandle;
  /**
   * Aborted to stop the running call: its processes are killed and confirmed gone, and its
   * result is an error whose code is the abort reason ("cancelled" or "interrupted"; reason
   * "lease-lost" kills only the call's own process group and records "interrupted").
   */
  signal?: AbortSignal;
  /** The run's token usage so far (kept by the worker), recorded in `run.paused`. */
  usage?: { inputTokens: number; outputTokens: number };
  /**
   * The model reviewer's share of the run's budget (the drive's; absent: no limit, nothing
   * counted): how much output a review may ask for given its prompt's estimated tokens (a
   * string: why none is left, and the review is not asked), and the counting of a review's
   * reported usage into the run's (recorded as usage.updated).
   */
  reviewBudget?: ReviewBudget;
  /**
   * The drive's writer: every append goes through it (fence, the run's secret redaction,
   * the head this drive has seen), and it gates every execution. Without it (tests, the
   * benchmark) appends go to the log with `fence`, and only the call's own secrets are known.
   */
  writer?: RunWriter;
  /** The worker that drives the run (`host:pid`), recorded in tool.started. */
  workerId?: string;
  /** The uploaded workspace's files (for the provenance of scripts a command runs). */
  baseIndex?: () => Promise<BaseIndex>;
  /**
   * True while nothing in the run could have written the workspace: no call of a tool that
   * writes (anything but repo.read and repo.search) was ever recorded, in this drive or an
   * earlier one. The provenance probe is then skipped (every file is as uploaded). The
   * kernel sets it to false before such a call executes; undefined counts as false.
   */
  pristine?: boolean;
  /**
   * test.run's and lint.run's commands as the uploaded workspace implies them (used where
   * the policy sets none; the result records which was used and where it came from).
   */
  commands?: RunCommands;
  /**
   * Files the run holds a secret in (secret-taint.ts), by absolute path; the drive derives
   * it from the log. A call that could read one waits for a person. Undefined: none yet.
   */
  taint?: Map<string, TaintedFile>;
  /**
   * The run's name key (held-names.ts: EventLog.runNameKey), fetched by the kernel the
   * first time containment needs it. Never logged, never sent anywhere.
   */
  nameKey?: NameKey;
  /**
   * The runner trees as last seen at a trusted point (runner-trees.ts): before the run's
   * first writing call while it was pristine, then after each setup.run, test.run and
   * lint.run. The kernel sets it; undefined: every entry of the trees counts as run-written.
   */
  runnerBaseline?: TreeScan;
  /**
   * True when the log shows no call but a runner's could have written the runner trees
   * since the last runner ended or the upload (runner-trees.ts treesAsLeft): a drive without
   * a baseline then takes the trees as they are. The kernel sets it to false before a
   * writing call executes; undefined counts as false.
   */
  treesAsLeft?: boolean;
  /**
   * Where this run's full tool outputs are stored (the drive's: charged to the run's tenant
   * and held until named); undefined: the kernel's own store.
   */
  artifacts?: ArtifactStore;
  /**
   * Called before every call that carries a secret, before anything of it runs: the drive
   * keeps the workspace's diff as it was before the first one (worker/before-secret.ts).
   */
  beforeSecret?: () => Promise<void>;
  /**
   * The run's goal (its prompt), shown to the model reviewer as untrusted data beside a
   * call's preview (`approval: reviewer`). Undefined: the reviewer is told none was given.
   */
  goal?: string;
}

/** A policy as one call's decision read it: the policy, whose it is, its file. */
export interface PolicyView {
  policy: Policy;
  source: "tenant" | "server";
  path: string | undefined;
}

/** Tools that never change the workspace (their calls keep a run pristine). */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(["repo.read", "repo.search"]);

export interface ProposedCall {
  callId: string;
  tool: string;
  input: unknown;
}

export type CallOutcome =
  | { kind: "result"; ok: boolean; output?: unknown; error?: { code: string; message: string } }
  | { kind: "paused"; approvalId: string; preview: PreviewData };

/** A preview as plain data (what approval.requested carries and the model receives). */
export interface ReviewBudget {
  allowance(promptTokens: number): Promise<number | undefined | string>;
  /**
   * Counts a review: what the provider reported, and where it reported nothing (0), the
   * estimate (the prompt's, the answer's length) — as a model step is counted.
   */
  spent(
    reported: { inputTokens: number; outputTokens: number },
    estimate: { inputTokens: number; outputTokens: number },
  ): Promise<void>;
}

export interface PreviewData {
  summary: string;
  files?: string[];
  hunks?: number;
  linesAdded?: number;
  linesRemoved?: number;
  diff?: string;
  argv?: string[];
  cwd?: string;
  matchedRules: string[];
  /** repo.patch: sha256 of the file the diff was computed from, "absent" for a new file. */
  baseSha256?: string;
  /** Files the run holds a secret in, that this call could read (secret-containment.ts). */
  secretFiles?: string[];
}

export interface KernelOptions {
  log: EventLog;
  /** The current policy (a reload takes effect on the next call). */
  policy: () => Policy;
  /**
   * Whose policy `policy()` answers now: "tenant" (the run's tenant's own file) or "server"
   * (default); on each decision's span as `agentd.policy.source`.
   */
  policySource?: () => "tenant" | "server";
  /**
   * The file `policy()` came from; its base name is recorded on each policy.decision
   * (`policy_file`) beside the policy's digest and source. Default: none recorded.
   */
  policyPath?: () => string;
  /**
   * The candidate (shadow) policy in force now, if any (docs/policy.md, "Shadow mode"): it
   * is evaluated beside `policy()` on every call, without effect; a call it would decide
   * differently gets a policy.shadow event. Read per call (a reload replaces it).
   */
  shadow?: () => { policy: Policy; source: "tenant" | "server"; path: string } | undefined;
  /** The tenant label of agentd_policy_shadow_differences_total (default ""). */
  shadowTenant?: string;
  /** Secret providers, in lookup order (environment, mounted files). */
  secretProviders: SecretProvider[];
  /** Adaptive-trust counters of the run's repository. */
  trustCounters?: (runId: string) => Promise<TrustCounters>;
  /**
   * Where the full output of a call goes when it is too large for its tool.result (which
   * then keeps head and tail, `truncated`, and the artifact's sha256 in `output_digest`).
   * Without a store only the head and tail are kept.
   */
  artifacts?: ArtifactStore;
  /** Clock, for tests. */
  now?: () => number;
  /**
   * The model reviewer for a policy's `reviewer.model` id (`approval: reviewer`);
   * undefined (or answering undefined): no reviewer, so every such call asks a person.
   */
  reviewerModel?: (modelId: string) => LanguageModel | undefined;
}

/** The decision for a call, with everything that led to it. */
export interface DecidedCall {
  input: Record<string, unknown>;
  assessment: Assessment;
  decision: Decision;
  /**
   * Set on a deny for invalid input: the result's error code is EVALIDATION (not EPOLICY)
   * and `field` names the input field at fault ("input" for the input as a whole).
   */
  invalid?: { field: string };
  /**
   * The held files this call could read (set by the containment guard, which asks a person
   * for it): its preview says so and is built without reading them (secret-containment.ts).
   */
  heldReads?: Map<string, TaintedFile>;
  /** The trust counters the decision used (for the shadow policy's decision). */
  counters?: TrustCounters;
  /** What the provenance and replace probes found (reused by shadow mode, never probed again). */
  probes?: ProbeFacts;
}

/** Longest free text the kernel puts into an event field (reasons, scopes, tool names). */
const MAX_REASON = 4 * 1024;
const MAX_SCOPE = 1024;
const MAX_TOOL_NAME = 256;
/**
 * Error codes of the event log and the stores it reads: the trust lookup passes these on
 * (the worker must see a lost lease or an unreachable store); any other failure of a step
 * before execution is a refusal of the call.
 */
const STORAGE_CODES: ReadonlySet<string> = new Set([
  "EENDED",
  "EFENCED",
  "EREWOUND",
  "EUNAVAILABLE",
  "ECONFLICT",
  "EIO",
  "ETIMEOUT",
]);

const DECISION_ENUM: Record<ControlPath, DecisionEnum> = {
  auto: DecisionEnum.AUTO,
  "preview+auto": DecisionEnum.PREVIEW_AUTO,
  "preview+approval": DecisionEnum.PREVIEW_APPROVAL,
  deny: DecisionEnum.DENY,
};

export interface Kernel {
  /** Takes a proposed call through the pipeline. A call that needs approval pauses the run. */
  handle(run: KernelRun, call: ProposedCall): Promise<CallOutcome>;
  /** Continues a call whose approval was resolved: runs it if approved, reports the denial if not. */
  continueAfterApproval(
    run: KernelRun,
    call: ProposedCall,
    approval: { approved: boolean; reason: string },
  ): Promise<CallOutcome>;
  /**
   * The decision alone, no I/O but the trust lookup (for previews of policy and the
   * benchmark); `detected`: the run's workspace commands (KernelRun.commands).
   */
  decideCall(
    call: ProposedCall,
    counters: TrustCounters,
    detected?: RunCommands,
    repo?: string,
  ): DecidedCall;
  /**
   * Shadow mode outside the kernel's calls (the egress proxy's connections): the enforced
   * policy and the candidate as they are now, and the metric's tenant label; undefined
   * without a candidate (or when asking for it fails: shadow mode never affects anything).
   */
  shadowSides?(): { enforced: PolicyView; candidate: PolicyView; tenant: string } | undefined;
}

/** Where a call runs, for the policy's approvedCommands (none without a repository). */
function scopeOf(repo: string | undefined, call: ProposedCall): ApprovedScope | undefined {
  return repo === undefined ? undefined : { repo, line: commandLineOf(call.input) };
}

export function createKernel(opts: KernelOptions): Kernel {
  const now = opts.now ?? Date.now;
  const source = opts.policySource ?? (() => "server" as const);
  /** The policy in force, whose it is and its file, read together. */
  const viewNow = (): PolicyView => ({
    policy: opts.policy(),
    source: source(),
    path: opts.policyPath?.(),
  });
  // Per policy object (the enforced one and a shadow candidate alternate on every call; a
  // reload makes a new object and the old entry goes with it).
  const compiledBy = new WeakMap<Policy, CompiledRisk>();
  const compiledRisk = (p: Policy): CompiledRisk => {
    let c = compiledBy.get(p);
    if (c === undefined) {
      c = compileRisk(p);
      compiledBy.set(p, c);
    }
    return c;
  };
  const resolver = () => {
    const p = opts.policy();
    return createSecretResolver({ allow: p.secrets.allow, providers: opts.secretProviders });
  };

  const append = (run: KernelRun, payload: EventPayload) =>
    run.writer !== undefined
      ? run.writer.append(payload)
      : opts.log.append({ runId: run.runId, sessionId: run.sessionId, fence: run.fence, payload });

  /** The run's name key (held-names.ts), from the log once per KernelRun. */
  const keyOf = async (run: KernelRun): Promise<NameKey> => {
    run.nameKey ??= nameKey(await opts.log.runNameKey(run.runId));
    return run.nameKey;
  };

  /** Total: a step that throws (validation, the jail, assessment, decision) is a deny. */
  function decideCall(
    call: ProposedCall,
    counters: TrustCounters,
    detected?: RunCommands,
    repo?: string,
    policy: Policy = opts.policy(),
  ): DecidedCall {
    try {
      return decideStrict(call, counters, detected, repo, policy);
    } catch (err) {
      return refusedBy(err, "kernel.decide", "decide on this call");
    }
  }

  function decideStrict(
    call: ProposedCall,
    counters: TrustCounters,
    detected: RunCommands | undefined,
    repo: string | undefined,
    policy: Policy,
  ): DecidedCall {
    const tool = toolByName(call.tool);
    if (tool === undefined)
      return deniedCall("capabilities", `unknown tool ${JSON.stringify(call.tool)}`);
    const parsed = tool.input.safeParse(call.input);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.join(".") || "input";
      return deniedCall(
        "input.schema",
        `${call.tool}: ${field}: ${issue?.message ?? "invalid input"}`,
        { field },
      );
    }
    const input = parsed.data as Record<string, unknown>;
    const commands = pickCommands(policy.tools, detected);
    const assessment = assess(call.tool, input, policy, compiledRisk(policy), commands);
    const decision = decide(call.tool, assessment, policy, counters, scopeOf(repo, call));
    const field = assessment.deny?.field;
    return { input, assessment, decision, ...(field === undefined ? {} : { invalid: { field } }) };
  }

  function toolContext(
    run: KernelRun,
    policy: Policy,
    tool: string,
    onChunk?: ToolContext["onOutput"],
  ): ToolContext {
    const capabilityTimeout = policy.capabilities[tool as keyof Policy["capabilities"]]?.timeout;
    const limits: ToolLimits = {
      maxFileReadBytes: policy.limits.maxFileRead,
      maxOutputBytes: policy.limits.maxStdout,
      maxSearchMatches: 200,
      maxDiffBytes: policy.limits.maxDiffSize,
      // The capability's timeout is both the default and the ceiling: a call may ask for
      // less, never for more than the policy allows.
      defaultTimeoutMs: capabilityTimeout ?? 5 * 60_000,
      maxTimeoutMs: capabilityTimeout ?? 30 * 60_000,
    };
    return {
      sandbox: run.sandbox,
      limits,
      // Search never reads secret files: reading one takes an explicit, approved repo.read.
      denyPatterns:
        tool === "repo.search"
          ? [...policy.workspace.denyPatterns, ...policy.risk.secretPaths]
          : policy.workspace.denyPatterns,
      commands: pickCommands(policy.tools, run.commands),
      ...(onChunk === undefined ? {} : { onOutput: onChunk }),
      ...(run.signal === undefined ? {} : { signal: run.signal }),
    };
  }

  /**
   * Sandbox work a preview did that its call reuses when it runs (repo.patch: the read and
   * plan), with how long it took (counted into the call's durationMs: the call's own work,
   * done early). Keyed by run and call id (models reuse call ids across runs), and kept
   * only for the same container and the same input. Bounded: entries of calls that never
   * run are dropped oldest first past MAX_PREPARED entries or MAX_PREPARED_BYTES of files.
   */
  const prepared = new Map<
    string,
    { value: unknown; ms: number; sandboxId: string; input: string; bytes: number }
  >();
  let preparedBytes = 0;
  const MAX_PREPARED = 64;
  const MAX_PREPARED_BYTES = 64 * 1024 * 1024;
  const preparedKey = (run: KernelRun, callId: string): string => `${run.runId}\u0000${callId}`;
  const takePrepared = (run: KernelRun, call: ProposedCall, input: unknown) => {
    const key = preparedKey(run, call.callId);
    const p = prepared.get(key);
    if (p === undefined) return undefined;
    prepared.delete(key);
    preparedBytes -= p.bytes;
    return p.sandboxId === run.sandbox.id && p.input === canonicalJson(input ?? null)
      ? p
      : undefined;
  };

  async function preview(
    run: KernelRun,
    policy: Policy,
    call: ProposedCall,
    d: DecidedCall,
    redactor: Redactor,
    content: Redactor,
  ): Promise<PreviewData> {
    const a = d.assessment;
    if (call.tool === "repo.patch") {
      const started = now();
      const planned = await planPatch(
        toolContext(run, policy, call.tool),
        d.input as { path: string },
      );
      const bytes = 2 * (planned.current.content?.length ?? 0);
      takePrepared(run, call, d.input); // a previous preview of the same call
      prepared.set(preparedKey(run, call.callId), {
        value: planned,
        ms: now() - started,
        sandboxId: run.sandbox.id,
        input: canonicalJson(d.input ?? null),
        bytes,
      });
      preparedBytes += bytes;
      while (prepared.size > MAX_PREPARED || preparedBytes > MAX_PREPARED_BYTES) {
        const [k, oldest] = prepared.entries().next().value as [string, { bytes: number }];
        prepared.delete(k);
        preparedBytes -= oldest.bytes;
      }
      const { summary } = planned;
      return {
        summary: `${summary.deleted ? "delete" : summary.created ? "create" : "patch"} ${summary.path}: ${summary.hunks} hunk(s), +${summary.linesAdded} -${summary.linesRemoved}`,
        files: [summary.path],
        hunks: summary.hunks,
        linesAdded: summary.linesAdded,
        linesRemoved: summary.linesRemoved,
        diff: content.text(summary.diff),
        matchedRules: a.matched,
        baseSha256: planned.current.sha256 ?? "absent",
      };
    }
    if (a.command !== undefined) {
      return {
        summary: `run ${JSON.stringify(redactor.text(a.command.line))} in ${a.command.cwd}`,
        argv: a.command.analysis.words.map((w) => redactor.text(w)),
        cwd: a.command.cwd,
        matchedRules: a.matched,
      };
    }
    return {
      summary: `${call.tool} ${redactor.text(canonicalJson(d.input)).slice(0, 500)}`,
      matchedRules: a.matched,
    };
  }

  async function execute(
    run: KernelRun,
    call: ProposedCall,
    d: DecidedCall,
    span: Span,
    recorded: boolean,
    preview?: PreviewData,
    approvedBase?: string,
  ): Promise<CallOutcome> {
    const policy = opts.policy();
    const res = resolver();
    // Key rules (TOKEN=…, "password": …) would rewrite source code that a later patch must
    // match, so repo.* outputs get secret values and patterns only; process output gets all.
    const isCommand =
      call.tool === "process.run" ||
      call.tool === "test.run" ||
      call.tool === "lint.run" ||
      call.tool === "setup.run";
    const redactor = createRedactor({
      secrets: secretsOf(run, res),
      keys: isCommand ? policy.redaction.keys : [],
      patterns: policy.redaction.patterns,
    });
    const early = takePrepared(run, call, d.input);
    const started = now() - (early?.ms ?? 0);
    let output: unknown;
    let error: { code: string; message: string } | undefined;
    let cancelledBeforeStart: Error | undefined;
    let contained: (() => Promise<void>) | undefined;
    const live = createLiveOutput((payload) => append(run, payload), redactor, call.callId);
    try {
      const { value, used } = await res.resolve(d.input);
      run.writer?.secrets.add(res.knownValues());
      contained = await containCall(
        run,
        call,
        used.length > 0,
        (payload) => append(run, payload),
        keyOf,
      );
      // The last check before the effect (nothing starts after a cancel request or the end),
      // and at most once: the start is in the log (acknowledged, not just queued) before
      // anything of the call runs, so a worker that takes the run over never runs it again.
      await beginEffect(run, call, recorded);
      if (!READ_ONLY_TOOLS.has(call.tool)) {
        // Nothing was written yet: the runner trees as they are now are the upload's.
        if (run.pristine === true || (run.runnerBaseline === undefined && run.treesAsLeft === true))
          run.runnerBaseline = await scanRunnerTrees(run.sandbox);
        run.pristine = false;
        run.treesAsLeft = false;
      }
      const tool = toolByName(call.tool) as NonNullable<ReturnType<typeof toolByName>>;
      const ctx = toolContext(run, policy, call.tool, live.push);
      // A preview saw the input without secret values: reuse it only for plain inputs.
      if (early !== undefined && used.length === 0) ctx.prepared = early.value;
      if (approvedBase !== undefined && approvedBase !== "") ctx.approvedBase = approvedBase;
      output = await inSpan(span, `sandbox ${call.tool}`, () => tool.execute(ctx, value as never));
    } catch (err) {
      // Nothing may be appended any more: the run ended, or the stored log lost events
      // this drive saw (the gate refused before the effect started).
      if (isAgentdError(err, "EENDED") || isAgentdError(err, "EREWOUND")) throw err;
      if (isAgentdError(err, "ECANCELLED")) cancelledBeforeStart = err;
      error = isAgentdError(err)
        ? { code: err.code, message: err.message }
        : { code: "EIO", message: "the tool failed unexpectedly" };
    } finally {
      await live.close();
    }
    // What a runner itself leaves in its trees is the runner's (a failed scan: no baseline).
    if (RUNNER_TOOLS.has(call.tool) && cancelledBeforeStart === undefined)
      run.runnerBaseline = await scanRunnerTrees(run.sandbox);
    // What a secret-carrying call wrote is in the log before its output is.
    if (contained !== undefined) await contained();
    const stopped = cancelledBeforeStart
      ? { code: "cancelled", message: "the run was cancelled before this call ran; it did not run" }
      : await stopReason(run);
    if (stopped !== undefined) {
      output = undefined;
      error = stopped;
    }
    const durationMs = BigInt(Math.max(0, now() - started));
    const envelope = await recordOutput(run, call, redactor, {
      output,
      error,
      durationMs,
      preview,
    });
    if (envelope.artifact !== undefined) {
      await append(run, {
        case: "artifactEmitted",
        value: create(ArtifactEmittedSchema, {
          name: clipText(`tool-output/${call.callId}`, MAX_TOOL_NAME),
          digest: envelope.artifact.digest,
          sizeBytes: BigInt(envelope.artifact.size),
          mediaType: "application/json",
        }),
      });
    }
    await append(run, { case: "toolResult", value: envelope.result });
    observeToolResult(call.tool, d.decision.path, envelope.result);
    if (cancelledBeforeStart !== undefined) throw cancelledBeforeStart; // the driver cancels
    const safeError = envelope.result.error;
    if (safeError !== undefined) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: safeError.code });
      return {
        kind: "result",
        ok: false,
        error: { code: safeError.code, message: safeError.message },
      };
    }
    // The model gets what the event holds: the head+tail form when the output was cut.
    const view = envelope.view as { result?: unknown } | undefined;
    return {
      kind: "result",
      ok: true,
      output:
        preview !== undefined && view !== null && typeof view === "object" && "result" in view
          ? view.result
          : view,
    };
  }

  /**
   * The tool.result of an executed call: redacted, fitted to one event (result-envelope.ts).
   * Redaction or encoding that throws makes an EIO result (the call ran; its output is lost).
   */
  async function recordOutput(
    run: KernelRun,
    call: ProposedCall,
    redactor: Redactor,
    r: {
      output: unknown;
      error: { code: string; message: string } | undefined;
      durationMs: bigint;
      preview: PreviewData | undefined;
    },
  ) {
    const place = { runId: run.runId, sessionId: run.sessionId };
    const common = { place, callId: call.callId, durationMs: r.durationMs };
    try {
      const safeOutput = r.output === undefined ? undefined : redactor.json(r.output);
      const o = safeOutput as { exitCode?: unknown; truncated?: unknown } | undefined;
      return await envelopeResult({
        ...common,
        ok: r.error === undefined,
        exitCode: typeof o?.exitCode === "number" ? o.exitCode : 0,
        ...(r.error === undefined
          ? {}
          : { error: { code: r.error.code, message: redactor.text(r.error.message) } }),
        document:
          safeOutput === undefined || r.preview === undefined
            ? safeOutput
            : { preview: r.preview, result: safeOutput },
        toolTruncated: o?.truncated === true,
        ...(call.tool === "test.run" && r.error === undefined
          ? { tests: testSummaryOf(safeOutput) }
          : {}),
        ...((run.artifacts ?? opts.artifacts) === undefined
          ? {}
          : { artifacts: run.artifacts ?? opts.artifacts }),
      });
    } catch (err) {
      return await envelopeResult({
        ...common,
        ok: false,
        exitCode: 0,
        error: { code: "EIO", message: `the output could not be recorded (${describeError(err)})` },
        document: undefined,
      });
    }
  }

  /**
   * The last check before the effect and the start's record, awaited (resolved only once the
   * log holds what it appends). `recorded`: tool.started went into the call's first commit
   * (a call that needs no person), so only the gate is left; else the writer's gate and
   * tool.started together (writer.begin: one round trip when nothing new is in the log).
   * Every tool, not only those that change something: a taker's rule needs no tool list.
   */
  async function beginEffect(run: KernelRun, call: ProposedCall, recorded: boolean) {
    if (recorded) await run.writer?.gate();
    else if (run.writer !== undefined) await run.writer.begin(startedOf(run, call));
    else await append(run, startedOf(run, call));
  }

  /** The trust counters, then the decision. A failed lookup refuses the call (fail closed), except the log's errors, which propagate. */
  async function decideWithTrust(
    run: KernelRun,
    call: ProposedCall,
    policy: Policy,
  ): Promise<DecidedCall> {
    let counters: TrustCounters = {};
    if (opts.trustCounters !== undefined) {
      try {
        counters = await opts.trustCounters(run.runId);
      } catch (err) {
        if (isStorageError(err)) throw err;
        return refusedBy(err, "kernel.trust", "look up the repository's trust counters");
      }
    }
    const d = { ...decideCall(call, counters, run.commands, run.repo, policy), counters };
    // While the run holds a secret, no probe reads the container for a decision: what a
    // probe finds (a name, whether a file changed or exists) would reach the log before a
    // person decides. A call a probe would judge asks instead (secret-containment.ts).
    if (run.taint !== undefined && run.taint.size > 0) return probeFree(run, call, d);
    const proven = await withProvenance(run, call, d, counters, policy);
    return withReplacing(run, call, proven, counters, policy);
  }

  /** `d` as it stands, asking a person where a probe of the container would have judged it. */
  function probeFree(run: KernelRun, call: ProposedCall, d: DecidedCall): DecidedCall {
    if (settled(d)) return d;
    const scripts = d.assessment.scripts ?? [];
    const analysis = d.assessment.command?.analysis;
    const probed =
      (run.baseIndex !== undefined && (scripts.length > 0 || runsRunner(call.tool, scripts))) ||
      (analysis !== undefined && needsReplacingProbe(analysis));
    if (!probed) return d;
    const { reviewer: _reviewer, ...decision } = d.decision;
    return { ...d, decision: { ...decision, path: "preview+approval" } };
  }

  /**
   * A decision no probe can change: a deny, or a person's approval. A call the model
   * reviewer answers first is not settled: what a probe finds (a file emptied or replaced)
   * is what keeps the reviewer from allowing it (reviewer/person-facts.ts).
   */
  function settled(d: DecidedCall): boolean {
    if (d.decision.path === "deny") return true;
    return d.decision.path === "preview+approval" && d.decision.reviewer !== true;
  }

  /**
   * A command that copies or moves files is judged again once the sandbox tells whether a
   * source is empty or a move's target exists (replace-probe.ts): emptying or replacing a
   * file asks as truncate does. Skipped when the call already waits for a person or is denied.
   */
  async function withReplacing(
    run: KernelRun,
    call: ProposedCall,
    d: DecidedCall,
    counters: TrustCounters,
    policy: Policy,
  ): Promise<DecidedCall> {
    if (settled(d)) return d;
    const analysis = d.assessment.command?.analysis;
    if (analysis === undefined || !needsReplacingProbe(analysis)) return d;
    const base = run.baseIndex === undefined ? undefined : await run.baseIndex();
    const uploaded = base === undefined ? undefined : (p: string) => base.get(p)?.type === "file";
    const found = await probeReplacing(run.sandbox, analysis, undefined, uploaded);
    const probes = { ...d.probes, replacing: { line: d.assessment.command?.line ?? "", found } };
    const a = applyReplacing(d.assessment, found, policy);
    if (a === d.assessment) return { ...d, probes };
    return {
      ...d,
      probes,
      assessment: a,
      decision: decide(call.tool, a, policy, counters, scopeOf(run.repo, call)),
    };
  }

  /**
   * A command that runs workspace files (assessment.scripts: s.sh, Makefile, package.json…)
   * is judged again once the sandbox tells which of them the run wrote or changed: those
   * make the call high risk (provenance.ts). Without the run's base index (a KernelRun made
   * outside a drive) the check is skipped.
   */
  async function withProvenance(
    run: KernelRun,
    call: ProposedCall,
    d: DecidedCall,
    counters: TrustCounters,
    policy: Policy,
  ): Promise<DecidedCall> {
    const scripts = d.assessment.scripts ?? [];
    const trees = runsRunner(call.tool, scripts);
    if ((scripts.length === 0 && !trees) || d.decision.path === "deny") return d;
    if (run.baseIndex === undefined) return d;
    // Nothing was written since the upload.
    if (run.pristine === true) return { ...d, probes: { provenance: { pristine: true } } };
    const changed =
      scripts.length === 0
        ? new Set<string>()
        : await changedSinceUpload(run.sandbox, scripts, await run.baseIndex());
    // A runner also runs what its PATH and imports reach (node_modules, venvs, caches).
    const treeWritten = trees ? await runnerTreeWrites(run, call.tool) : [];
    const probes: ProbeFacts = {
      provenance: {
        pristine: false,
        scripts: new Set(scripts),
        changed,
        ...(trees ? { treeWritten } : {}),
      },
    };
    const a = applyProvenance(d.assessment, changed, policy, treeWritten);
    if (a === d.assessment) return { ...d, probes };
    return {
      ...d,
      probes,
      assessment: a,
      decision: decide(call.tool, a, policy, counters, scopeOf(run.repo, call)),
    };
  }

  /**
   * The runner-tree entries some call other than a runner wrote (runner-trees.ts). A drive
   * without a baseline takes the trees as they are when the log says only runners wrote
   * them since; else every entry counts, except for setup.run, which reinstalls them.
   */
  async function runnerTreeWrites(run: KernelRun, tool: string): Promise<string[]> {
    const now = await scanRunnerTrees(run.sandbox);
    if (run.runnerBaseline === undefined && run.treesAsLeft === true && now !== undefined)
      run.runnerBaseline = now;
    if (run.runnerBaseline === undefined && tool === "setup.run" && now !== undefined) return [];
    return treeChanges(run.runnerBaseline, now);
  }

  /**
   * The policy.shadow event of the call (and the record countShadow counts once it is
   * appended) when a candidate policy is set and decides it differently; undefined otherwise, and whenever anything about it fails (shadow mode
   * never affects the enforced path).
   */
  function shadowOf(
    run: KernelRun,
    call: ProposedCall,
    toolName: string,
    d: DecidedCall,
    unguarded: boolean,
    redactor: Redactor,
    enforced: PolicyView,
  ): { record: ShadowRecord; payload: EventPayload } | undefined {
    try {
      const cand = opts.shadow?.();
      if (cand === undefined) return undefined;
      const decision = candidateDecision(
        {
          tool: call.tool,
          input: call.input,
          decision: d.decision,
          invalid: d.invalid !== undefined || d.counters === undefined,
          ...(unguarded ? {} : { contained: d.decision }),
          probes: d.probes ?? {},
        },
        {
          policy: cand.policy,
          compiled: compiledRisk,
          counters: d.counters ?? {},
          ...(run.commands === undefined ? {} : { detected: run.commands }),
          tainted: run.taint !== undefined && run.taint.size > 0,
          hasBase: run.baseIndex !== undefined,
          ...(run.repo === undefined ? {} : { scope: scopeOf(run.repo, call) }),
        },
      );
      const gated = withReviewerGate(d, decision, enforced.policy, cand.policy);
      if (!decisionsDiffer(d.decision, gated)) return undefined;
      const cmd = d.assessment.command;
      const summary =
        cmd !== undefined
          ? `run ${JSON.stringify(redactor.text(cmd.line))} in ${cmd.cwd}`
          : `${toolName} ${redactor.text(canonicalJson(d.input))}`;
      const record: ShadowRecord = {
        callId: call.callId,
        tool: toolName,
        enforced: {
          decision: d.decision,
          policy: enforced.policy,
          source: enforced.source,
          path: enforced.path,
        },
        candidate: { decision: gated, policy: cand.policy, source: cand.source, path: cand.path },
        summary: summary.slice(0, 600),
        redact: (s) => redactor.text(s),
        tenant: opts.shadowTenant ?? "",
      };
      return { record, payload: shadowEvent(record) };
    } catch {
      return undefined;
    }
  }

  /** Appends a failed tool.result (message redacted by the caller, clipped here). */
  async function fail(
    run: KernelRun,
    call: ProposedCall,
    path: ControlPath,
    error: { code: string; message: string },
    span?: Span,
  ): Promise<CallOutcome> {
    const e = { code: error.code, message: clipText(error.message, MAX_REASON) };
    const result = create(ToolResultSchema, { callId: call.callId, ok: false, error: e });
    await append(run, { case: "toolResult", value: result });
    observeToolResult(call.tool, path, result);
    span?.setStatus({ code: SpanStatusCode.ERROR, message: e.code });
    return { kind: "result", ok: false, error: e };
  }

  async function handle(run: KernelRun, call: ProposedCall): Promise<CallOutcome> {
    // One reading of the policy for the whole decision: a reload while a probe or the trust
    // lookup is awaited must not decide by one policy and record another's digest.
    const view = viewNow();
    const policy = view.policy;
    const res = resolver();
    // What describes the call (its record, the decision, a command's preview) hides secret
    // values only. Key and pattern rules are guesses for outputs: on the record they would
    // change the call itself — a resumed call is rebuilt from it, so `_authToken=$ENV.T` or
    // `--author="A"` must stay as the model wrote them, and the approver must see them.
    const secrets = secretsOf(run, res);
    const redactor = createRedactor({ secrets });
    // A patch preview shows file content: values and patterns, as repo.* outputs get.
    const contentRedactor = createRedactor({ secrets, patterns: policy.redaction.patterns });
    const place = { runId: run.runId, sessionId: run.sessionId };
    const toolName = clipText(call.tool, MAX_TOOL_NAME);
    const callSpan = tracer().startSpan(`execute_tool ${toolName}`, {
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": toolName,
        "gen_ai.tool.call.id": call.callId,
        "agentd.run.id": run.runId,
      },
    });
    try {
      // Invariant 2: the call is in the log before anything it does happens. It is decided
      // first (nothing the decision does changes anything: the provenance probe only reads)
      // and the call and its decision are committed together, in that order: one round trip.
      const recorded = recordCallInput(place, call.callId, toolName, call.input, redactor.json);
      const unguarded =
        recorded.refusal === undefined
          ? await decideWithTrust(run, call, policy)
          : deniedCall(recorded.refusal.rule, recorded.refusal.reason, { field: "input" });
      const d = await guardTaint(run, call, unguarded, keyOf);
      // After the decision is final, and from its facts only: the candidate never changes it.
      const shadow = shadowOf(run, call, toolName, d, d === unguarded, redactor, view);
      traceDecision(callSpan, call.callId, toolName, d, "kernel.decide", view.source);
      const r = d.assessment.risk;
      // A call that runs without a person: its start is recorded in the same commit (no
      // round trip of its own); one that waits for a person records it when it runs.
      const runsNow = d.decision.path === "auto" || d.decision.path === "preview+auto";
      await Promise.all([
        append(run, {
          case: "toolCall",
          value: create(ToolCallSchema, {
            callId: call.callId,
            tool: toolName,
            inputJson: recorded.inputJson,
          }),
        }),
        append(run, {
          case: "policyDecision",
          value: create(PolicyDecisionSchema, {
            callId: call.callId,
            decision: DECISION_ENUM[d.decision.path],
            rule: clipText(d.decision.rule, MAX_TOOL_NAME),
            reason: clipText(redactor.text(d.decision.reason), MAX_REASON),
            risk: create(RiskProfileSchema, {
              ...r,
              scope: clipText(redactor.text(r.scope), MAX_SCOPE),
            }),
            trustAdjustments: d.decision.trustAdjustments,
            reviewer: d.decision.reviewer === true,
            ...decisionProvenance(policy, view.source, view.path),
          }),
        }),
        ...(shadow === undefined ? [] : [append(run, shadow.payload)]),
        ...(runsNow ? [append(run, startedOf(run, call))] : []),
      ]);
      if (shadow !== undefined) countShadow(shadow.record);
      if (d.decision.path === "deny") {
        const code = d.invalid === undefined ? "EPOLICY" : "EVALIDATION";
        const reason = redactor.text(d.decision.reason);
        return await fail(run, call, "deny", { code, message: reason }, callSpan);
      }
      let pv: PreviewData | undefined;
      if (d.decision.path !== "auto") {
        try {
          pv = previewTaint(
            run,
            call,
            d,
            heldPatchPreview(run, call, d) ??
              (await preview(run, policy, call, d, redactor, contentRedactor)),
          );
        } catch (err) {
          // The dry run shows the call cannot succeed (e.g. a hunk that does not apply):
          // nothing to approve; the model gets the error and can change its plan.
          const error = isAgentdError(err)
            ? { code: err.code, message: redactor.text(err.message) }
            : { code: "EIO", message: `preview failed (${redactor.text(describeError(err))})` };
          return await fail(run, call, d.decision.path, error);
        }
      }
      if (d.decision.path === "preview+approval" && pv !== undefined) {
        let extra: ApprovalExtra = {};
        if (d.decision.reviewer === true) {
          const r = await askReviewer(reviewerDeps(run, res), run, call, toolName, d, pv);
          if (r.verdict === "allow") return await execute(run, call, d, callSpan, false, pv);
          if (r.verdict === "deny")
            return await fail(
              run,
              call,
              "deny",
              { code: "EREVIEWER_DENIED", message: r.message },
              callSpan,
            );
          extra = r.approval;
        }
        const paused = await requestApproval(run, call, toolName, pv, extra);
        if (paused.kind === "paused")
          callSpan.setAttribute("agentd.approval.id", paused.approvalId);
        return paused;
      }
      return await execute(run, call, d, callSpan, true, pv);
    } catch (err) {
      callSpan.setStatus({
        code: SpanStatusCode.ERROR,
        message: (err as { code?: string }).code ?? "error",
      });
      throw err;
    } finally {
      callSpan.end();
    }
  }

  /**
   * approval.requested (with the preview, cut head+tail to fit one event: the person sees
   * where it was cut) and run.paused, in one commit.
   */
  async function requestApproval(
    run: KernelRun,
    call: ProposedCall,
    toolName: string,
    pv: PreviewData,
    extra: ApprovalExtra,
  ): Promise<CallOutcome> {
    const ticket =
      extra.ticket ?? approvalTicket(run.runId, now(), opts.policy().approvals.expireAfter);
    const { approvalId } = ticket;
    const request = (p: PreviewData): EventPayload => ({
      case: "approvalRequested",
      value: create(ApprovalRequestedSchema, {
        ...ticket,
        callId: call.callId,
        tool: toolName,
        preview: toPreviewMessage(p),
        reviewerVerdict: extra.reviewerVerdict ?? "",
        reviewerNote: extra.reviewerNote ?? "",
      }),
    });
    const shown = fitDocument(pv, {
      place: { runId: run.runId, sessionId: run.sessionId },
      maxJson: EVENT_BUDGET,
      note: (n, unit) => `\n[agentd: ${n} ${unit} of the preview left out here]\n`,
      build: (shaped) => request(shaped as PreviewData),
    }).shaped as PreviewData;
    // One commit for both (issued in the same tick, so the batcher seals them together):
    // nobody can resolve the approval between its request and the pause, which would
    // leave the run looking paused for an approval already decided.
    const requested = append(run, request(shown));
    const paused = append(run, {
      case: "runPaused",
      value: create(RunPausedSchema, {
        reason: "approval",
        approvalId,
        ...(run.usage === undefined
          ? {}
          : {
              usage: {
                inputTokens: BigInt(run.usage.inputTokens),
                outputTokens: BigInt(run.usage.outputTokens),
              },
            }),
      }),
    });
    await Promise.all([requested, paused]);
    return { kind: "paused", approvalId, preview: shown };
  }

  async function continueAfterApproval(
    run: KernelRun,
    call: ProposedCall,
    approval: { approved: boolean; reason: string },
  ): Promise<CallOutcome> {
    const span = tracer().startSpan(`execute_tool ${clipText(call.tool, MAX_TOOL_NAME)}`, {
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": clipText(call.tool, MAX_TOOL_NAME),
        "gen_ai.tool.call.id": call.callId,
        "agentd.run.id": run.runId,
        "agentd.approval.approved": approval.approved,
      },
    });
    try {
      if (!approval.approved) {
        takePrepared(run, call, call.input); // never runs: drop its preview's plan
        const message = `a person denied this call${approval.reason ? `: ${approval.reason}` : ""}`;
        return await fail(
          run,
          call,
          "preview+approval",
          { code: "EAPPROVAL_DENIED", message },
          span,
        );
      }
      // Re-decide under the current policy: an approval never unlocks what policy now denies.
      const d = await decideWithTrust(run, call, opts.policy());
      traceDecision(
        span,
        call.callId,
        clipText(call.tool, MAX_TOOL_NAME),
        d,
        "kernel.recheck",
        source(),
      );
      if (d.decision.path === "deny") {
        takePrepared(run, call, call.input);
        const code = d.invalid === undefined ? "EPOLICY" : "EVALIDATION";
        return await fail(run, call, "deny", { code, message: d.decision.reason }, span);
      }
      // What the person approved was computed from one state of the file: the call is
      // written onto that state only (the preview's sha256, from the log).
      return await execute(run, call, d, span, false, undefined, await approvedBaseOf(run, call));
    } finally {
      span.end();
    }
  }

  /** What the reviewer step needs of the kernel (reviewer/ask-reviewer.ts). */
  function reviewerDeps(run: KernelRun, res: { knownValues(): readonly string[] }) {
    const policy = opts.policy();
    return {
      policy,
      model: (id: string) => opts.reviewerModel?.(id),
      ticket: () => approvalTicket(run.runId, now(), policy.approvals.expireAfter),
      redactor: createRedactor({
        secrets: secretsOf(run, res),
        keys: policy.redaction.keys,
        patterns: policy.redaction.patterns,
      }),
      append: (payload: EventPayload) => append(run, payload),
    };
  }

  /** The base_sha256 of the preview the call's approval showed ("" when none). */
  async function approvedBaseOf(run: KernelRun, call: ProposedCall): Promise<string> {
    const events = await opts.log.read(run.runId, 0);
    for (let i = events.length - 1; i >= 0; i--) {
      const p = events[i]?.event.payload;
      if (p?.case === "approvalRequested" && p.value.callId === call.callId)
        return p.value.preview?.baseSha256 ?? "";
    }
    return "";
  }

  function shadowSides() {
    try {
      const cand = opts.shadow?.();
      if (cand === undefined) return undefined;
      return { enforced: viewNow(), candidate: cand, tenant: opts.shadowTenant ?? "" };
    } catch {
      return undefined;
    }
  }

  return { handle, continueAfterApproval, decideCall, shadowSides };
}

/** What approval.requested carries beyond the call when a reviewer asked a person. */
export interface ApprovalExtra {
  ticket?: ReturnType<typeof approvalTicket>;
  reviewerVerdict?: string;
  reviewerNote?: string;
}

/**
 * A preview as an event message: every text well-formed (a command or path may carry lone
 * surrogates), tolerant of the fallback form of a preview cut to fit (summary in `head`).
 */
function toPreviewMessage(p: PreviewData): Preview {
  const cut = p as Partial<PreviewData> & { head?: string };
  const text = (s: string | undefined): string => (s ?? "").toWellFormed();
  const texts = (xs: string[] | undefined): string[] => (xs ?? []).map(text);
  return create(PreviewSchema, {
    summary: text(cut.summary ?? cut.head),
    files: texts(p.files),
    hunks: p.hunks ?? 0,
    linesAdded: p.linesAdded ?? 0,
    linesRemoved: p.linesRemoved ?? 0,
    diff: text(p.diff),
    argv: texts(p.argv),
    cwd: text(p.cwd),
    matchedRules: texts(cut.matchedRules),
    baseSha256: p.baseSha256 ?? "",
    secretFiles: texts(p.secretFiles),
  });
}

/** The record that a call's execution begins (see beginEffect). */
function startedOf(run: KernelRun, call: ProposedCall): EventPayload {
  return {
    case: "toolStarted",
    value: create(ToolStartedSchema, {
      callId: call.callId,
      workerId: clipText(run.workerId ?? "", MAX_TOOL_NAME),
    }),
  };
}

/** A deny decided before (or instead of) the assessment. */
function deniedCall(rule: string, reason: string, invalid?: { field: string }): DecidedCall {
  return {
    input: {},
    assessment: {
      risk: {
        category: "read",
        scope: "",
        estimatedImpact: "low",
        touchesSecrets: false,
        touchesConfig: false,
        touchesBuild: false,
      },
      matched: [rule],
      approvalFacts: [],
      deny: { rule, reason },
    },
    decision: { path: "deny", rule, reason, trustAdjustments: [] },
    ...(invalid === undefined ? {} : { invalid }),
  };
}

/**
 * The deny for a step that threw: EVALIDATION naming the field when the input was at fault
 * (a path over the jail's length limit), else a refusal under `rule` (fail closed).
 */
function refusedBy(err: unknown, rule: string, what: string): DecidedCall {
  if (isAgentdError(err, "EVALIDATION"))
    return deniedCall("input.schema", err.message, { field: err.field ?? "input" });
  return deniedCall(
    rule,
    `the kernel could not ${what} (${describeError(err)}); the call is refused`,
  );
}

function describeError(err: unknown): string {
  const text = isAgentdError(err)
    ? `${err.code}: ${err.message}`
    : err instanceof Error
      ? `${err.name}: ${err.message}`
      : "a non-error value was thrown";
  return clipText(text, 1024);
}

/**
 * A call stopped by its run's signal (cancel, or the worker halting): every process of the
 * run's container is killed and confirmed gone before the result says so (invariant 8);
 * the result's code is the abort reason.
 */
async function stopReason(run: KernelRun): Promise<{ code: string; message: string } | undefined> {
  if (run.signal?.aborted !== true) return undefined;
  const reason = typeof run.signal.reason === "string" ? run.signal.reason : "cancelled";
  // A lost lease: the container may be another worker's now (which kills everything in it
  // before it goes on); only this call's own process group was killed, and this result
  // will be refused by the log anyway (fenced).
  if (reason === OWNER_CHANGED)
    return {
      code: "interrupted",
      message: "the worker lost the run's lease; this call was killed",
    };
  await run.sandbox.killAll();
  if (reason === WALL_BUDGET_REASON) return { ...WALL_BUDGET_ERROR };
  return reason === "interrupted"
    ? { code: reason, message: "the worker stopped this call; its processes were killed" }
    : { code: "cancelled", message: "the run was cancelled; this call's processes were killed" };
}

/**
 * The secret values a redactor hides: the call's own (resolved just now) and the run's
 * (resolved by any call of the run). The same array until either grows, so the redactor
 * does not rebuild its matcher on every use.
 */
function secretsOf(run: KernelRun, res: { knownValues(): readonly string[] }) {
  let a: readonly string[] | undefined;
  let b: readonly string[] | undefined;
  let both: readonly string[] = [];
  return (): readonly string[] => {
    const x = res.knownValues();
    const y = run.writer?.secrets.values() ?? [];
    if (x !== a || y !== b) {
      a = x;
      b = y;
      both = y.length === 0 ? x : x.length === 0 ? y : [...new Set([...x, ...y])];
    }
    return both;
  };
}

function isStorageError(err: unknown): boolean {
  return isAgentdError(err) && STORAGE_CODES.has(err.code);
}
