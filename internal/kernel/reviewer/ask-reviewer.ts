/**
 * The kernel's reviewer step for a call decided `preview+approval` under
 * `approval: reviewer`: asks the model (review-call.ts), records reviewer.verdict (the
 * model's answer and what took effect, reasoning redacted and clipped, the prompt's
 * digest) and tells the kernel what to do: run the call, refuse it with the reasoning, or
 * ask a person (with the approval id the verdict names). Must never send a call that
 * could read a file the run holds a secret in to the model (a person decides those), and
 * never let an allow through for a call the policy's reviewer.personFor marks.
 */
import { create } from "@bufbuild/protobuf";
import type { LanguageModel } from "ai";
import type { EventPayload } from "../../eventlog/event-codec.ts";
import { ReviewerVerdictSchema } from "../../gen/agentd/v1/events_pb.js";
import type { approvalTicket } from "../approval-ticket.ts";
import { clipText } from "../head-tail.ts";
import type {
  ApprovalExtra,
  DecidedCall,
  KernelRun,
  PreviewData,
  ProposedCall,
} from "../kernel.ts";
import type { Policy } from "../policy-schema.ts";
import type { Redactor } from "../redaction.ts";
import { personFactsOf } from "./person-facts.ts";
import { type ReviewOutcome, reviewCall, type Verdict } from "./review-call.ts";

/** Longest reasoning or note recorded (and told to the model on a deny). */
export const MAX_REVIEWER_TEXT = 4 * 1024;

export interface ReviewerDeps {
  policy: Policy;
  model: (id: string) => LanguageModel | undefined;
  ticket: () => ReturnType<typeof approvalTicket>;
  /** Redacts model text as the kernel redacts process output. */
  redactor: Redactor;
  append: (payload: EventPayload) => Promise<unknown>;
}

export interface ReviewStep {
  verdict: Verdict;
  /** On a deny: the tool error the model gets. */
  message: string;
  /** On an ask: what approval.requested carries. */
  approval: ApprovalExtra;
}

export async function askReviewer(
  deps: ReviewerDeps,
  run: KernelRun,
  call: ProposedCall,
  toolName: string,
  d: DecidedCall,
  pv: PreviewData,
): Promise<ReviewStep> {
  const config = deps.policy.reviewer;
  const outcome: ReviewOutcome =
    (d.heldReads !== undefined && d.heldReads.size > 0) || (pv.secretFiles ?? []).length > 0
      ? {
          verdict: "ask",
          modelVerdict: "",
          reasoning: "",
          confidence: 0,
          model: config.model ?? "",
          promptDigest: "",
          note: "the call could read a file the run holds a secret in: not sent to the reviewer",
        }
      : await reviewCall({
          model: config.model === undefined ? undefined : deps.model(config.model),
          config,
          goal: run.goal ?? "(no goal given)",
          tool: toolName,
          preview: pv,
          personFacts: personFactsOf(
            d.assessment,
            config.personFor,
            call.tool === "repo.patch" && destroysFile(pv),
          ),
          ...(run.reviewBudget === undefined ? {} : { budget: run.reviewBudget }),
          ...(run.signal === undefined ? {} : { signal: run.signal }),
        });
  const reasoning = clipText(deps.redactor.text(outcome.reasoning), MAX_REVIEWER_TEXT);
  const note = clipText(deps.redactor.text(outcome.note), MAX_REVIEWER_TEXT);
  const ticket = outcome.verdict === "ask" ? deps.ticket() : undefined;
  await deps.append({
    case: "reviewerVerdict",
    value: create(ReviewerVerdictSchema, {
      callId: call.callId,
      approvalId: ticket?.approvalId ?? "",
      verdict: outcome.verdict,
      modelVerdict: outcome.modelVerdict,
      reasoning,
      confidence: Number.isFinite(outcome.confidence) ? outcome.confidence : 0,
      model: clipText(outcome.model, 256),
      promptDigest: outcome.promptDigest,
      note,
    }),
  });
  return {
    verdict: outcome.verdict,
    message: `the model reviewer denied this call: ${reasoning || "(no reasoning given)"}`,
    approval:
      ticket === undefined
        ? {}
        : { ticket, reviewerVerdict: outcome.modelVerdict, reviewerNote: note },
  };
}

/**
 * A repo.patch that deletes a file, or empties one (its diff leaves the file with no line:
 * a hunk `+0,0`, as `: > f` or `truncate -s0` do for a command), or wipes it down to blank
 * lines (as `echo > f`): destructive.
 */
function destroysFile(pv: { summary: string; diff?: string }): boolean {
  if (pv.summary.startsWith("delete ")) return true;
  const diff = pv.diff ?? "";
  return /^@@ -\d+(?:,\d+)? \+0,0 @@/m.test(diff) || diff.split(/^(?=@@ )/m).some(wipes);
}

/**
 * A hunk from the file's first line that removes text, adds only blank lines and shows no
 * context: nothing of the file is left around it (a whole file left blank). Fails closed
 * for a hand-made diff without context: a person decides.
 */
function wipes(hunk: string): boolean {
  if (!/^@@ -1(?:,\d+)? \+\d+(?:,\d+)? @@/.test(hunk)) return false;
  const lines = hunk
    .split("\n")
    .slice(1)
    .filter((l) => l !== "" && !l.startsWith("\\"));
  const removed = lines.filter((l) => l.startsWith("-"));
  return (
    removed.some((l) => l.slice(1).trim() !== "") &&
    !lines.some((l) => l.startsWith(" ")) &&
    lines.filter((l) => l.startsWith("+")).every((l) => l.slice(1).trim() === "")
  );
}
