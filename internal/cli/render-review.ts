/**
 * How agentctl shows the model reviewer's records (reviewer.verdict, reviewer.overridden)
 * in `events` (one line each) and `watch` (the live view). Takes messages already passed
 * through escapeMessage (render.ts), so every text is free of control characters; it
 * must never print the model's reasoning unclipped (one line, bounded).
 */
import type { ReviewerVerdict, ReviewOverridden } from "../gen/agentd/v1/events_pb.js";
import { oneLine, type Style } from "./style.ts";

/** `allow (model: allow 0.95) c1 …`: what took effect, and what the model said when it differs. */
export function verdictDetail(v: ReviewerVerdict): string {
  const model =
    v.modelVerdict === "" ? "no usable answer" : `${v.modelVerdict} ${v.confidence.toFixed(2)}`;
  const approval = v.approvalId === "" ? "" : ` ${v.approvalId}`;
  const note = v.note === "" ? "" : ` [${oneLine(v.note, 160)}]`;
  const why = v.reasoning === "" ? "" : `: ${oneLine(v.reasoning, 120)}`;
  return `${v.callId} ${v.verdict} (${v.model || "?"}: ${model})${approval}${note}${why} prompt=${v.promptDigest.slice(0, 12) || "-"}`;
}

export function overrideDetail(v: ReviewOverridden): string {
  const target = v.approvalId === "" ? v.callId : `${v.callId} ${v.approvalId}`;
  return `${target} ${v.previousVerdict} → ${v.verdict} by ${v.overriddenBy}${v.attention ? " ATTENTION" : ""}: ${oneLine(v.reason, 160)}`;
}

/** The live view's line for a reviewer verdict. */
export function verdictLine(v: ReviewerVerdict, st: Style): string {
  const mark =
    v.verdict === "allow"
      ? st.green("✔ reviewer allowed")
      : v.verdict === "deny"
        ? st.red("✘ reviewer denied")
        : st.yellow("? reviewer asks a person");
  const model =
    v.modelVerdict === "" || v.modelVerdict === v.verdict
      ? ""
      : st.dim(` (the model said ${v.modelVerdict})`);
  const note = v.note === "" ? "" : st.dim(` — ${oneLine(v.note, 160)}`);
  const why = v.reasoning === "" ? "" : `: ${oneLine(v.reasoning, 200)}`;
  const conf = v.modelVerdict === "" ? "" : st.dim(` confidence ${v.confidence.toFixed(2)}`);
  return `  ${mark} ${v.callId}${model}${why}${conf}${note}${st.dim(` [${v.model || "?"}]`)}`;
}

/** The live view's line for an override. */
export function overrideLine(v: ReviewOverridden, st: Style): string {
  const flag = v.attention ? ` ${st.bold(st.red("ATTENTION: the call already ran"))}` : "";
  return `  ${st.magenta("⚑ reviewer overridden")} ${v.callId}: ${v.previousVerdict} → ${v.verdict} by ${v.overriddenBy}: ${oneLine(v.reason, 200)}${flag}`;
}
