/**
 * One run: GetRun's header (state, prompt, labels, usage), the live event list
 * (StreamEvents), the chain check, and Cancel for a live run.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Event } from "../../gen/agentd/v1/events_pb.js";
import type { Run } from "../../gen/agentd/v1/run_service_pb.js";
import { errorText } from "./api.ts";
import { debounce } from "./debounce.ts";
import { EventList } from "./event-list.tsx";
import { ago, dollars, isTerminal, stateName, tsDate, useNow } from "./format.ts";
import { Labels } from "./labels.tsx";
import { newerRun } from "./newer-run.ts";
import { useRunEvents } from "./run-stream.ts";
import { useSession } from "./session.ts";
import { visibleText } from "./shown-text.ts";
import { StateBadge } from "./state-badge.tsx";
import { EMPTY, fold, type Timeline } from "./timeline.ts";
import { type ChainResult, GENESIS, verifyChain } from "./verify.ts";

const eventTs = (e: Event) => tsDate(e.ts);

/** How often a live run's summary is read again besides the refresh after its events. */
const RUN_POLL_MS = 3000;

export function RunPage(props: { runId: string }) {
  const { api, roles } = useSession();
  const { runId } = props;
  const [run, setRun] = useState<Run | undefined>(undefined);
  const [loadError, setLoadError] = useState("");
  const [timeline, setTimeline] = useState<Timeline>(EMPTY);
  const [chain, setChain] = useState<ChainResult>({ ok: true, through: 0n });
  const chainRef = useRef<Promise<{ result: ChainResult; hash: string }>>(
    Promise.resolve({ result: { ok: true, through: 0n }, hash: GENESIS }),
  );
  const now = useNow();

  // Bumped by a resync: an answer asked for before it may hold the lost events.
  const generation = useRef(0);
  const loadRun = useCallback(async () => {
    try {
      const asked = generation.current;
      const next = (await api.getRun({ runId })).run;
      if (asked !== generation.current) return;
      setRun((prev) => newerRun(prev, next));
      setLoadError("");
    } catch (err) {
      setLoadError(errorText(err));
    }
  }, [api, runId]);
  const refresh = useMemo(() => debounce(() => void loadRun(), 200), [loadRun]);
  useEffect(() => {
    void loadRun();
    return () => refresh.cancel();
  }, [loadRun, refresh]);
  // While the run is live, its summary is read again every few seconds as well: a refresh
  // that follows the events can still miss the last one (answers crossing, a stream that
  // reconnected), and a run waiting for a person has no later event to correct the page.
  const live = run === undefined || !isTerminal(run.state);
  useEffect(() => {
    if (!live) return;
    const t = setInterval(() => void loadRun(), RUN_POLL_MS);
    return () => clearInterval(t);
  }, [live, loadRun]);

  const onEvents = useCallback(
    (events: Event[]) => {
      setTimeline((t) => fold(t, events, eventTs));
      chainRef.current = chainRef.current.then(async (prev) => {
        const next = await verifyChain(events, prev);
        setChain(next.result);
        return next;
      });
      refresh();
    },
    [refresh],
  );
  // The stored log lost events the page showed: drop everything and read the run again.
  const onResync = useCallback(() => {
    generation.current++;
    setRun(undefined);
    setTimeline(EMPTY);
    setChain({ ok: true, through: 0n });
    chainRef.current = Promise.resolve({ result: { ok: true, through: 0n }, hash: GENESIS });
    refresh();
  }, [refresh]);
  const stream = useRunEvents(api, runId, onEvents, onResync);

  return (
    <article aria-labelledby="run-h">
      <p>
        <a href="#/runs">← All runs</a>
      </p>
      <h1 id="run-h">
        Run <span class="mono">{runId}</span>
      </h1>
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      {run && (
        <RunHeader
          run={run}
          now={now}
          canCancel={roles.includes("submit") || roles.includes("admin")}
          onChanged={loadRun}
        />
      )}
      <h2>Events</h2>
      <p class="hint" role="status">
        {streamText(stream.status, stream.error)} · {chainText(chain)}
      </p>
      <EventList items={timeline.items} run={run} />
    </article>
  );
}

function streamText(status: string, error: string): string {
  switch (status) {
    case "live":
      return "following live";
    case "ended":
      return "the run has ended: all events shown";
    case "reconnecting":
      return `stream broken (${error}); reconnecting…`;
    case "error":
      return error;
    default:
      return "connecting…";
  }
}

function chainText(c: ChainResult): string {
  if (c.ok === true)
    return c.through === 0n
      ? "chain: nothing to check yet"
      : `chain verified through seq ${c.through}`;
  if (c.ok === false) return `chain BROKEN at seq ${c.seq}: ${c.why}`;
  return `chain not checked: ${c.why}`;
}

function RunHeader(props: { run: Run; now: number; canCancel: boolean; onChanged: () => void }) {
  const { api } = useSession();
  const { run: r } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const live = !isTerminal(r.state);

  async function cancel() {
    if (!confirm(`Cancel run ${r.runId}? The agent stops and the run ends cancelled.`)) return;
    setBusy(true);
    setError("");
    try {
      await api.cancelRun({ runId: r.runId, reason: "cancelled from the console" });
      props.onChanged();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class={`run-head ${live ? "" : "ended"}`} aria-label="Run summary">
      <p class="state-line" aria-live="polite">
        <StateBadge state={r.state} testid="run-state" />
        {r.pendingApprovalId && <span class="waits">waits for a person</span>}
        {r.heldBy && (
          <span class="waits" data-testid="run-held" title={visibleText(r.heldMessage)}>
            held by {visibleText(r.heldBy)}
          </span>
        )}
        {r.cancelRequested && live && <span class="hint">cancelling…</span>}
        {!live && <span class="ended-note">This run has ended ({stateName(r.state)}).</span>}
      </p>
      <dl class="facts">
        <dt>Prompt</dt>
        <dd class="prompt">{visibleText(r.prompt)}</dd>
        {Object.keys(r.labels).length > 0 && (
          <>
            <dt>Labels</dt>
            <dd>
              <Labels labels={r.labels} />
            </dd>
          </>
        )}
        <dt>Created</dt>
        <dd>{ago(tsDate(r.createdAt), props.now)}</dd>
        <dt>Usage</dt>
        <dd>
          {String(r.usage?.inputTokens ?? 0n)} in / {String(r.usage?.outputTokens ?? 0n)} out tokens
          · {dollars(r.costMicros)} · {String(r.toolCallCount)} tool calls
        </dd>
        {r.summary && (
          <>
            <dt>Summary</dt>
            <dd>{visibleText(r.summary)}</dd>
          </>
        )}
        {r.error && (
          <>
            <dt>Error</dt>
            <dd class="error">
              {r.error.code}: {visibleText(r.error.message)}
            </dd>
          </>
        )}
      </dl>
      {live && props.canCancel && (
        <p>
          <button type="button" class="deny" data-testid="cancel" disabled={busy} onClick={cancel}>
            {busy ? "Cancelling…" : "Cancel run"}
          </button>
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
