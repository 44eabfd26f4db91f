/**
 * The tracing of one kernel decision: the call's `execute_tool {tool}` span is opened by the
 * kernel; this adds its `kernel.decide` child with the decision's attributes (policy path,
 * rule, whose policy (tenant or server), trust adjustments, risk category and impact, what it touches). Never the call's
 * input, its scope or a secret.
 */
import { context as otelContext, type Span, trace } from "@opentelemetry/api";
import { tracer } from "../telemetry/tracing.ts";
import { clipText } from "./head-tail.ts";
import type { DecidedCall } from "./kernel.ts";

/** Longest rule name put on a span (the kernel clips tool names and rules to this). */
const MAX_RULE = 256;

export function traceDecision(
  callSpan: Span,
  callId: string,
  toolName: string,
  d: DecidedCall,
  /** "kernel.recheck": the decision made again when an approved call resumes (no event). */
  name: "kernel.decide" | "kernel.recheck" = "kernel.decide",
  /** Whose policy decided: the run's tenant's own file, or the server's. */
  source: "tenant" | "server" = "server",
): void {
  const r = d.assessment.risk;
  const decideSpan = tracer().startSpan(name, {}, trace.setSpan(otelContext.active(), callSpan));
  decideSpan.setAttributes({
    "gen_ai.tool.name": toolName,
    "gen_ai.tool.call.id": callId,
    "agentd.policy.decision": d.decision.path,
    "agentd.policy.rule": clipText(d.decision.rule, MAX_RULE),
    "agentd.policy.source": source,
    "agentd.policy.trust_adjustments": d.decision.trustAdjustments,
    "agentd.risk.category": r.category,
    "agentd.risk.estimated_impact": r.estimatedImpact,
    "agentd.risk.touches_secrets": r.touchesSecrets,
    "agentd.risk.touches_config": r.touchesConfig,
    "agentd.risk.touches_build": r.touchesBuild,
  });
  decideSpan.end();
}
