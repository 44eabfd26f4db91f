/**
 * One approval: what the call would do (summary, diff, argv, host:port) and, for a token
 * with the approve role, Approve / Deny with a reason (ResolveApproval), and for a command
 * or a host the option to propose a rule with the approval (an admin applies it). Without
 * the role the buttons are not rendered at all.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { Preview } from "../../gen/agentd/v1/events_pb.js";
import { ApprovalDecision, ProposedRuleKind } from "../../gen/agentd/v1/events_pb.js";
import { errorText } from "./api.ts";
import { Diff } from "./diff.tsx";
import { runHref } from "./route.ts";
import { canApprove, useSession } from "./session.ts";
import { commandFacts, visible } from "./shown-text.ts";

export interface ApprovalView {
  approvalId: string;
  runId: string;
  tool: string;
  preview: Preview | undefined;
  /** "3 min ago", or empty. */
  age: string;
  pending: boolean;
}

export function ApprovalCard(props: {
  approval: ApprovalView;
  showRun: boolean;
  /** The card's heading level: 2 on the approvals page, 3 inside a run's event list. */
  level: 2 | 3;
  onResolved?: () => void;
}) {
  const session = useSession();
  const { approval: a } = props;
  const p = a.preview;
  // A command's line exactly as it will run (the argv alone drops `;`, `&&`, `|`, `>`).
  const cmd = p === undefined ? undefined : commandFacts(p);
  const [reason, setReason] = useState("");
  // A rule can come from an approved command (its family in the run's repository) or an
  // approved host (network); the server derives it from the call, never from this page.
  const ruleKind = a.tool === "network" ? "host" : a.tool === "process.run" ? "command" : undefined;
  const [proposeRule, setProposeRule] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [done, setDone] = useState("");
  const reasonId = `reason-${a.approvalId}`;
  const headId = `approval-h-${a.approvalId}`;

  async function resolve(decision: ApprovalDecision) {
    setBusy(true);
    setError("");
    try {
      const withRule =
        decision === ApprovalDecision.APPROVE && proposeRule && ruleKind !== undefined;
      await session.api.resolveApproval({
        approvalId: a.approvalId,
        decision,
        reason,
        ...(withRule
          ? {
              proposeRule: {
                kind: ruleKind === "host" ? ProposedRuleKind.HOST : ProposedRuleKind.COMMAND,
              },
            }
          : {}),
      });
      setDone(
        decision !== ApprovalDecision.APPROVE
          ? "Denied."
          : withRule
            ? `Approved; a ${ruleKind} rule was proposed for an admin to apply.`
            : "Approved.",
      );
      props.onResolved?.();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <article
      class="card approval"
      data-testid={`approval-${a.approvalId}`}
      aria-labelledby={headId}
    >
      <Heading level={props.level} id={headId}>
        Approval for <code>{a.tool}</code>{" "}
        {a.pending ? <span class="state state-paused">pending</span> : null}
      </Heading>
      <dl class="facts">
        {props.showRun && (
          <>
            <dt>Run</dt>
            <dd>
              <a href={runHref(a.runId)} class="mono">
                {a.runId}
              </a>
            </dd>
          </>
        )}
        {a.age && (
          <>
            <dt>Requested</dt>
            <dd>{a.age}</dd>
          </>
        )}
        {p?.summary && (
          <>
            <dt>Summary</dt>
            <dd>{visible(p.summary)}</dd>
          </>
        )}
        {cmd?.line !== undefined && (
          <>
            <dt>Command</dt>
            <dd>
              <code class="command" data-testid="command">
                {cmd.line}
              </code>
              {cmd.cwd && <span class="hint"> in {cmd.cwd}</span>}
            </dd>
          </>
        )}
        {cmd && (
          <>
            <dt>{cmd.line === undefined ? "Argv" : "Words"}</dt>
            <dd>
              <code class="command" data-testid="argv">
                {cmd.words}
              </code>
              {cmd.line === undefined && cmd.cwd && <span class="hint"> in {cmd.cwd}</span>}
            </dd>
          </>
        )}
        {a.tool === "network" && p?.host && (
          <>
            <dt>Host</dt>
            <dd>
              <code>
                {visible(p.host)}:{p.port}
              </code>
            </dd>
          </>
        )}
        {p && p.files.length > 0 && (
          <>
            <dt>Files</dt>
            <dd>
              {p.files.map((f) => visible(f)).join(", ")}{" "}
              <span class="hint">
                (+{p.linesAdded} −{p.linesRemoved}, {p.hunks} hunk{p.hunks === 1 ? "" : "s"})
              </span>
            </dd>
          </>
        )}
        {p && p.matchedRules.length > 0 && (
          <>
            <dt>Rules</dt>
            <dd>{visible(p.matchedRules.join(", "))}</dd>
          </>
        )}
      </dl>
      {a.pending && p?.diff && <Diff diff={p.diff} />}
      {a.pending && canApprove(session) && !done && (
        <div class="decide">
          <label for={reasonId}>Reason (optional; a denial tells the agent why)</label>
          <input
            id={reasonId}
            data-testid="reason"
            type="text"
            value={reason}
            maxLength={4096}
            onInput={(e) => setReason(e.currentTarget.value)}
          />
          {ruleKind !== undefined && (
            <label class="propose-rule">
              <input
                type="checkbox"
                data-testid="propose-rule"
                checked={proposeRule}
                onChange={(e) => setProposeRule(e.currentTarget.checked)}
              />{" "}
              {ruleKind === "host"
                ? "Also propose a rule: allow this host (an admin applies it)"
                : "Also propose a rule: allow this command family in this repository (an admin applies it)"}
            </label>
          )}
          <div class="actions">
            <button
              type="button"
              data-testid="approve"
              class="approve"
              disabled={busy}
              onClick={() => resolve(ApprovalDecision.APPROVE)}
            >
              Approve
            </button>
            <button
              type="button"
              data-testid="deny"
              class="deny"
              disabled={busy}
              onClick={() => resolve(ApprovalDecision.DENY)}
            >
              Deny
            </button>
          </div>
        </div>
      )}
      {a.pending && !canApprove(session) && (
        <p class="hint">Your token has no approve role: someone who has it decides.</p>
      )}
      <p role="status" class="done">
        {done}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </article>
  );
}

function Heading(props: { level: 2 | 3; id: string; children: ComponentChildren }) {
  return props.level === 2 ? (
    <h2 id={props.id}>{props.children}</h2>
  ) : (
    <h3 id={props.id}>{props.children}</h3>
  );
}
