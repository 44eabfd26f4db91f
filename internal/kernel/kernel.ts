/**
 * The kernel: the only path from a proposed tool call to an effect.
 *
 *   tool.call → validate → jail → risk profile → policy decision → [preview → approval]
 *   → resolve secrets → execute in the sandbox → redact → cap → tool.result
 *
 * Every step that matters is an event (appended with the run owner's fencing token before
 * the next step runs) and the decision is an OpenTelemetry span. It must never: run a tool
 * the decision did not allow, put a secret value into an event, a log or a span, or return
 * unbounded output.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { context as otelContext, type Span, SpanStatusCode, trace } from "@opentelemetry/api";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { canonicalJson } from "../eventlog/canonical-json.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import {
  ApprovalRequestedSchema,
  Decision as DecisionEnum,
  OutputStream,
  PolicyDecisionSchema,
  type Preview,
  PreviewSchema,
  RiskProfileSchema,
  RunPausedSchema,
  ToolCallSchema,
  ToolOutputSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { tracer } from "../telemetry/tracing.ts";
import { toolByName } from "../tools/registry.ts";
import { planPatch } from "../tools/repo-patch.ts";
import type { ToolContext, ToolLimits } from "../tools/tool.ts";
import { type ControlPath, type Decision, decide } from "./decide.ts";
import type { Policy } from "./policy-schema.ts";
import { createRedactor, createStreamRedactor, type Redactor } from "./redaction.ts";
import { type Assessment, assess, type CompiledRisk, compileRisk } from "./risk.ts";
import type { SecretProvider } from "./secrets.ts";
import { createSecretResolver } from "./secrets.ts";
import type { TrustCounters } from "./trust.ts";

/** The run a call belongs to, and the owner's right to write its log. */
export interface KernelRun {
  runId: string;
  sessionId: string;
  /** The owner's lease epoch: every append carries it (a stale owner is refused). */
  fence: number;
  sandbox: SandboxHandle;
  /** Aborted when the run is cancelled: the running tool's process group is killed. */
  signal?: AbortSignal;
  /** The run's token usage so far (kept by the worker), recorded in `run.paused`. */
  usage?: { inputTokens: number; outputTokens: number };
}

export interface ProposedCall {
  callId: string;
  tool: string;
  input: unknown;
}

export type CallOutcome =
  | { kind: "result"; ok: boolean; output?: unknown; error?: { code: string; message: string } }
  | { kind: "paused"; approvalId: string; preview: PreviewData };

/** A preview as plain data (what approval.requested carries and the model receives). */
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
}

export interface KernelOptions {
  log: EventLog;
  /** The current policy (a reload takes effect on the next call). */
  policy: () => Policy;
  /** Secret providers, in lookup order (environment, mounted files). */
  secretProviders: SecretProvider[];
  /** Adaptive-trust counters of the run's repository. */
  trustCounters?: (runId: string) => Promise<TrustCounters>;
  /** Clock, for tests. */
  now?: () => number;
}

/** The decision for a call, with everything that led to it. */
export interface DecidedCall {
  input: Record<string, unknown>;
  assessment: Assessment;
  decision: Decision;
}

/** Largest tool output kept in a tool.result event; the rest is cut (and marked). */
const MAX_RESULT_JSON = 256 * 1024;
/** Live output is coalesced: at most one tool.output event per stream per interval. */
const OUTPUT_FLUSH_MS = 100;
const OUTPUT_FLUSH_BYTES = 16 * 1024;

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
  /** The decision alone, no I/O but the trust lookup (for previews of policy and the benchmark). */
  decideCall(call: ProposedCall, counters: TrustCounters): DecidedCall;
}

export function createKernel(opts: KernelOptions): Kernel {
  const now = opts.now ?? Date.now;
  let compiledFor: Policy | undefined;
  let compiled: CompiledRisk | undefined;
  const compiledRisk = (p: Policy): CompiledRisk => {
    if (compiledFor !== p || compiled === undefined) {
      compiled = compileRisk(p);
      compiledFor = p;
    }
    return compiled;
  };
  const resolver = () => {
    const p = opts.policy();
    return createSecretResolver({ allow: p.secrets.allow, providers: opts.secretProviders });
  };

  const append = (run: KernelRun, payload: EventPayload) =>
    opts.log.append({ runId: run.runId, sessionId: run.sessionId, fence: run.fence, payload });

  function decideCall(call: ProposedCall, counters: TrustCounters): DecidedCall {
    const policy = opts.policy();
    const tool = toolByName(call.tool);
    if (tool === undefined) {
      const reason = `unknown tool ${JSON.stringify(call.tool)}`;
      return denied({}, "capabilities", reason);
    }
    const parsed = tool.input.safeParse(call.input);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.join(".") || "(input)";
      return denied(
        {},
        "input.schema",
        `${call.tool}: ${field}: ${issue?.message ?? "invalid input"}`,
      );
    }
    const input = parsed.data as Record<string, unknown>;
    const assessment = assess(call.tool, input, policy, compiledRisk(policy));
    return { input, assessment, decision: decide(call.tool, assessment, policy, counters) };

    function denied(input: Record<string, unknown>, rule: string, reason: string): DecidedCall {
      return {
        input,
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
      };
    }
  }

  function toolContext(
    run: KernelRun,
    policy: Policy,
    tool: string,
    onChunk?: ToolContext["onOutput"],
  ): ToolContext {
    const limits: ToolLimits = {
      maxFileReadBytes: policy.limits.maxFileRead,
      maxOutputBytes: policy.limits.maxStdout,
      maxSearchMatches: 200,
      maxDiffBytes: policy.limits.maxDiffSize,
      defaultTimeoutMs:
        policy.capabilities[tool as keyof Policy["capabilities"]]?.timeout ?? 5 * 60_000,
      maxTimeoutMs: Math.max(
        30 * 60_000,
        policy.capabilities[tool as keyof Policy["capabilities"]]?.timeout ?? 0,
      ),
    };
    return {
      sandbox: run.sandbox,
      limits,
      // Search never reads secret files: reading one takes an explicit, approved repo.read.
      denyPatterns:
        tool === "repo.search"
          ? [...policy.workspace.denyPatterns, ...policy.risk.secretPaths]
          : policy.workspace.denyPatterns,
      commands: {
        ...(policy.tools.test ? { test: policy.tools.test } : {}),
        ...(policy.tools.lint ? { lint: policy.tools.lint } : {}),
      },
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
        diff: redactor.text(summary.diff),
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
    preview?: PreviewData,
    approvedBase?: string,
  ): Promise<CallOutcome> {
    const policy = opts.policy();
    const res = resolver();
    // Key rules (TOKEN=…, "password": …) would rewrite source code that a later patch must
    // match, so repo.* outputs get secret values and patterns only; process output gets all.
    const isCommand =
      call.tool === "process.run" || call.tool === "test.run" || call.tool === "lint.run";
    const redactor = createRedactor({
      secrets: () => res.knownValues(),
      keys: isCommand ? policy.redaction.keys : [],
      patterns: policy.redaction.patterns,
    });
    const early = takePrepared(run, call, d.input);
    const started = now() - (early?.ms ?? 0);
    let output: unknown;
    let error: { code: string; message: string } | undefined;
    const live = createLiveOutput(run, redactor, call.callId);
    try {
      const { value, used } = await res.resolve(d.input);
      const tool = toolByName(call.tool) as NonNullable<ReturnType<typeof toolByName>>;
      const ctx = toolContext(run, policy, call.tool, live.push);
      // A preview saw the input without secret values: reuse it only for plain inputs.
      if (early !== undefined && used.length === 0) ctx.prepared = early.value;
      if (approvedBase !== undefined && approvedBase !== "") ctx.approvedBase = approvedBase;
      output = await tool.execute(ctx, value as never);
    } catch (err) {
      error = isAgentdError(err)
        ? { code: err.code, message: err.message }
        : { code: "EIO", message: "the tool failed unexpectedly" };
    } finally {
      await live.close();
    }
    const safeOutput = output === undefined ? undefined : redactor.json(output);
    let outputJson =
      safeOutput === undefined
        ? ""
        : canonicalJson(preview === undefined ? safeOutput : { preview, result: safeOutput });
    const truncated = outputJson.length > MAX_RESULT_JSON;
    if (truncated)
      outputJson = JSON.stringify({ truncated: true, head: outputJson.slice(0, MAX_RESULT_JSON) });
    const exitCode =
      typeof (safeOutput as { exitCode?: unknown })?.exitCode === "number"
        ? (safeOutput as { exitCode: number }).exitCode
        : 0;
    const safeError =
      error === undefined ? undefined : { code: error.code, message: redactor.text(error.message) };
    await append(run, {
      case: "toolResult",
      value: create(ToolResultSchema, {
        callId: call.callId,
        ok: error === undefined,
        outputJson,
        exitCode,
        durationMs: BigInt(Math.max(0, now() - started)),
        truncated,
        ...(safeError === undefined ? {} : { error: safeError }),
      }),
    });
    if (safeError !== undefined)
      span.setStatus({ code: SpanStatusCode.ERROR, message: safeError.code });
    return safeError === undefined
      ? { kind: "result", ok: true, output: safeOutput }
      : { kind: "result", ok: false, error: safeError };
  }

  /** Coalesces live output into tool.output events (redacted, split secrets caught). */
  function createLiveOutput(run: KernelRun, redactor: Redactor, callId: string) {
    const pending: Record<"stdout" | "stderr", string> = { stdout: "", stderr: "" };
    const streams = {
      stdout: createStreamRedactor(redactor, 4096),
      stderr: createStreamRedactor(redactor, 4096),
    };
    let timer: NodeJS.Timeout | undefined;
    let chain: Promise<unknown> = Promise.resolve();
    const flush = (): void => {
      timer = undefined;
      for (const s of ["stdout", "stderr"] as const) {
        const chunk = pending[s];
        if (chunk === "") continue;
        pending[s] = "";
        chain = chain.then(() =>
          append(run, {
            case: "toolOutput",
            value: create(ToolOutputSchema, {
              callId,
              stream: s === "stdout" ? OutputStream.STDOUT : OutputStream.STDERR,
              chunk,
            }),
          }),
        );
      }
    };
    return {
      push: (stream: "stdout" | "stderr", text: string): void => {
        pending[stream] += streams[stream].push(text);
        if (pending[stream].length >= OUTPUT_FLUSH_BYTES) flush();
        else timer ??= setTimeout(flush, OUTPUT_FLUSH_MS);
      },
      async close(): Promise<void> {
        clearTimeout(timer);
        pending.stdout += streams.stdout.end();
        pending.stderr += streams.stderr.end();
        flush();
        await chain;
      },
    };
  }

  async function handle(run: KernelRun, call: ProposedCall): Promise<CallOutcome> {
    const policy = opts.policy();
    const res = resolver();
    const redactor = createRedactor({
      secrets: () => res.knownValues(),
      keys: policy.redaction.keys,
      patterns: policy.redaction.patterns,
    });
    const callSpan = tracer().startSpan("execute_tool", {
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.callId,
        "agentd.run.id": run.runId,
      },
    });
    try {
      // Invariant 2: the call is in the log before anything happens. Placeholders stay.
      await append(run, {
        case: "toolCall",
        value: create(ToolCallSchema, {
          callId: call.callId,
          tool: call.tool,
          inputJson: redactor.text(canonicalJson(call.input ?? null)),
        }),
      });
      const counters = opts.trustCounters ? await opts.trustCounters(run.runId) : {};
      const decideSpan = tracer().startSpan(
        "kernel.decide",
        {},
        trace.setSpan(otelContext.active(), callSpan),
      );
      const d = decideCall(call, counters);
      const r = d.assessment.risk;
      decideSpan.setAttributes({
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.callId,
        "agentd.policy.decision": d.decision.path,
        "agentd.policy.rule": d.decision.rule,
        "agentd.policy.trust_adjustments": d.decision.trustAdjustments,
        "agentd.risk.category": r.category,
        "agentd.risk.scope": redactor.text(r.scope),
        "agentd.risk.estimated_impact": r.estimatedImpact,
        "agentd.risk.touches_secrets": r.touchesSecrets,
        "agentd.risk.touches_config": r.touchesConfig,
        "agentd.risk.touches_build": r.touchesBuild,
      });
      decideSpan.end();
      await append(run, {
        case: "policyDecision",
        value: create(PolicyDecisionSchema, {
          callId: call.callId,
          decision: DECISION_ENUM[d.decision.path],
          rule: d.decision.rule,
          reason: redactor.text(d.decision.reason),
          risk: create(RiskProfileSchema, { ...r, scope: redactor.text(r.scope) }),
          trustAdjustments: d.decision.trustAdjustments,
        }),
      });
      if (d.decision.path === "deny") {
        const error = { code: "EPOLICY", message: redactor.text(d.decision.reason) };
        await append(run, {
          case: "toolResult",
          value: create(ToolResultSchema, { callId: call.callId, ok: false, error }),
        });
        callSpan.setStatus({ code: SpanStatusCode.ERROR, message: "EPOLICY" });
        return { kind: "result", ok: false, error };
      }
      let pv: PreviewData | undefined;
      if (d.decision.path !== "auto") {
        try {
          pv = await preview(run, policy, call, d, redactor);
        } catch (err) {
          // The dry run shows the call cannot succeed (e.g. a hunk that does not apply):
          // nothing to approve; the model gets the error and can change its plan.
          const error = isAgentdError(err)
            ? { code: err.code, message: redactor.text(err.message) }
            : { code: "EIO", message: "preview failed" };
          await append(run, {
            case: "toolResult",
            value: create(ToolResultSchema, { callId: call.callId, ok: false, error }),
          });
          return { kind: "result", ok: false, error };
        }
      }
      if (d.decision.path === "preview+approval" && pv !== undefined) {
        const approvalId = `apr_${run.runId}_${ulid(now())}`;
        const expireAfter = policy.approvals.expireAfter;
        // One commit for both (issued in the same tick, so the batcher seals them together):
        // nobody can resolve the approval between its request and the pause, which would
        // leave the run looking paused for an approval already decided.
        const requested = append(run, {
          case: "approvalRequested",
          value: create(ApprovalRequestedSchema, {
            approvalId,
            callId: call.callId,
            tool: call.tool,
            preview: toPreviewMessage(pv),
            ...(expireAfter === undefined
              ? {}
              : { expiresAt: timestampFromMs(now() + expireAfter) }),
          }),
        });
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
        return { kind: "paused", approvalId, preview: pv };
      }
      return await execute(run, call, d, callSpan, pv);
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

  async function continueAfterApproval(
    run: KernelRun,
    call: ProposedCall,
    approval: { approved: boolean; reason: string },
  ): Promise<CallOutcome> {
    const span = tracer().startSpan("execute_tool", {
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.callId,
        "agentd.run.id": run.runId,
        "agentd.approval.approved": approval.approved,
      },
    });
    try {
      if (!approval.approved) {
        takePrepared(run, call, call.input); // never runs: drop its preview's plan
        const error = {
          code: "EAPPROVAL_DENIED",
          message: `a person denied this call${approval.reason ? `: ${approval.reason}` : ""}`,
        };
        await append(run, {
          case: "toolResult",
          value: create(ToolResultSchema, { callId: call.callId, ok: false, error }),
        });
        return { kind: "result", ok: false, error };
      }
      // Re-decide under the current policy: an approval never unlocks what policy now denies.
      const d = decideCall(call, opts.trustCounters ? await opts.trustCounters(run.runId) : {});
      if (d.decision.path === "deny") {
        takePrepared(run, call, call.input);
        const error = { code: "EPOLICY", message: d.decision.reason };
        await append(run, {
          case: "toolResult",
          value: create(ToolResultSchema, { callId: call.callId, ok: false, error }),
        });
        return { kind: "result", ok: false, error };
      }
      // What the person approved was computed from one state of the file: the call is
      // written onto that state only (the preview's sha256, from the log).
      return await execute(run, call, d, span, undefined, await approvedBaseOf(run, call));
    } finally {
      span.end();
    }
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

  return { handle, continueAfterApproval, decideCall };
}

function toPreviewMessage(p: PreviewData): Preview {
  return create(PreviewSchema, {
    summary: p.summary,
    files: p.files ?? [],
    hunks: p.hunks ?? 0,
    linesAdded: p.linesAdded ?? 0,
    linesRemoved: p.linesRemoved ?? 0,
    diff: p.diff ?? "",
    argv: p.argv ?? [],
    cwd: p.cwd ?? "",
    matchedRules: p.matchedRules,
    baseSha256: p.baseSha256 ?? "",
  });
}
