/** A run's timeline as a list: text, tool calls, approvals, artifacts, state changes. */
import { useState } from "preact/hooks";
import { ApprovalDecision, Decision, type TestSummary } from "../../gen/agentd/v1/events_pb.js";
import type { Run } from "../../gen/agentd/v1/run_service_pb.js";
import { policyLabel } from "../../text/policy-label.ts";
import { failureLocation, safeLine } from "../../tools/test-results/format-summary.ts";
import { errorText } from "./api.ts";
import { ApprovalCard } from "./approval-card.tsx";
import { downloadArtifact } from "./download.ts";
import { ago, bytes, duration, useNow } from "./format.ts";
import { useSession } from "./session.ts";
import { visibleText } from "./shown-text.ts";
import type { Item } from "./timeline.ts";
import { toolStatus } from "./tool-status.ts";

const DECISIONS: Record<Decision, string> = {
  [Decision.UNSPECIFIED]: "undecided",
  [Decision.AUTO]: "auto",
  [Decision.PREVIEW_AUTO]: "preview, auto",
  [Decision.PREVIEW_APPROVAL]: "needs approval",
  [Decision.DENY]: "denied",
};

export function EventList(props: { items: readonly Item[]; run: Run | undefined }) {
  return (
    <ol class="events" aria-label="Events of the run">
      {props.items.map((it) => (
        <li key={it.key} class={`ev ev-${it.kind}`}>
          <ItemView item={it} run={props.run} />
        </li>
      ))}
    </ol>
  );
}

function ItemView(props: { item: Item; run: Run | undefined }) {
  const it = props.item;
  switch (it.kind) {
    case "text":
      return (
        <div class="text">
          <span class="tag">model</span>
          <p class="model-text">{visibleText(it.text)}</p>
        </div>
      );
    case "tool":
      return <ToolView item={it} />;
    case "approval":
      return <ApprovalItem item={it} run={props.run} />;
    case "artifact":
      return <ArtifactView item={it} runId={props.run?.runId ?? ""} />;
    case "state":
      return (
        <div class={it.alert === true ? "statechange alert" : "statechange"}>
          <span class="tag">{it.type}</span> {visibleText(it.detail)}
        </div>
      );
  }
}

function ToolView(props: { item: Extract<Item, { kind: "tool" }> }) {
  const { item: t } = props;
  const d = t.decision;
  const r = t.result;
  const out = r ? r.outputJson || r.error?.message || "" : t.output;
  return (
    <div class="tool">
      <div class="tool-head">
        <span class="tag">tool</span> <code>{t.tool}</code>{" "}
        {d && (
          <span class={`decision decision-${d.decision}`} title={d.reason}>
            {DECISIONS[d.decision]}
            {d.rule ? ` (${d.rule})` : ""}
          </span>
        )}{" "}
        {r ? (
          <span class={toolStatus(r).cls}>
            {toolStatus(r).text} · {duration(r.durationMs)}
          </span>
        ) : (
          <span class="hint">
            {d?.decision === Decision.PREVIEW_APPROVAL
              ? "waits for a decision…"
              : d?.decision === Decision.DENY
                ? ""
                : "running…"}
          </span>
        )}
      </div>
      {d?.reason && <p class="hint">{visibleText(d.reason)}</p>}
      {d && policyLabel(d) !== "" && (
        // Which policy decided: its source, file and digest (what policy.changed names).
        <p class="hint policy" data-testid="decision-policy" title={`sha256 ${d.policyDigest}`}>
          policy: {visibleText(policyLabel(d))}
        </p>
      )}
      {r?.tests && r.tests.failures.length > 0 && <TestFailures tests={r.tests} />}
      <details>
        <summary>Input</summary>
        <pre class="mono">{visibleText(pretty(t.input))}</pre>
      </details>
      {out && (
        <details>
          <summary>Output{r?.truncated ? " (truncated)" : ""}</summary>
          <pre class="mono">{visibleText(pretty(out))}</pre>
        </details>
      )}
    </div>
  );
}

/** test.run's failing tests: name, where, and the first line of the message (full on hover). */
function TestFailures(props: { tests: TestSummary }) {
  const t = props.tests;
  return (
    <table class="test-failures" aria-label="Failing tests">
      <thead>
        <tr>
          <th>Failing test</th>
          <th>Where</th>
          <th>Message</th>
        </tr>
      </thead>
      <tbody>
        {t.failures.map((f, i) => (
          <tr key={i} class="bad">
            <td class="mono">{safeLine(f.name, 300)}</td>
            <td class="mono">{failureLocation(f)}</td>
            <td title={f.message}>{safeLine(f.message.split("\n")[0] ?? "", 300)}</td>
          </tr>
        ))}
        {t.moreFailures > 0 && (
          <tr>
            <td colSpan={3} class="hint">
              … {t.moreFailures} more (see the output)
            </td>
          </tr>
        )}
      </tbody>
    </table>
  );
}

function pretty(json: string): string {
  try {
    const v: unknown = JSON.parse(json);
    if (typeof v === "string") return v;
    return JSON.stringify(v, null, 2);
  } catch {
    return json;
  }
}

function ApprovalItem(props: { item: Extract<Item, { kind: "approval" }>; run: Run | undefined }) {
  const { item: a, run } = props;
  const now = useNow();
  const pending = a.resolved === undefined && run?.pendingApprovalId === a.req.approvalId;
  return (
    <div>
      <ApprovalCard
        level={3}
        showRun={false}
        approval={{
          approvalId: a.req.approvalId,
          runId: run?.runId ?? "",
          tool: a.req.tool,
          preview: a.req.preview,
          age: ago(a.ts, now),
          pending,
        }}
      />
      {a.resolved && (
        <p class="resolved">
          {a.resolved.decision === ApprovalDecision.APPROVE ? "Approved" : "Denied"} by{" "}
          {a.resolved.resolvedBy}
          {a.resolved.reason ? `: ${a.resolved.reason}` : ""}
        </p>
      )}
    </div>
  );
}

function ArtifactView(props: { item: Extract<Item, { kind: "artifact" }>; runId: string }) {
  const { api } = useSession();
  const { art } = props.item;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  async function get() {
    setBusy(true);
    setError("");
    try {
      await downloadArtifact(api, props.runId, art.digest, art.name);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <div class="artifact">
      <span class="tag">artifact</span> <code>{art.name}</code>{" "}
      <span class="hint">
        {art.mediaType} · {bytes(art.sizeBytes)}
      </span>{" "}
      <button type="button" class="secondary" disabled={busy} onClick={get}>
        {busy ? "Downloading…" : `Download ${art.name}`}
      </button>
      {error && (
        <span class="error" role="alert">
          {" "}
          {error}
        </span>
      )}
    </div>
  );
}
