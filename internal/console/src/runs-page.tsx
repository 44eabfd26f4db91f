/** The tenant's runs (ListRuns, 50 newest), filtered by state, refreshed live by WatchEvents. */
import { useCallback, useEffect, useState } from "preact/hooks";
import { type Run, RunState } from "../../gen/agentd/v1/run_service_pb.js";
import { errorText } from "./api.ts";
import { useFeed } from "./feed.ts";
import { ago, FILTER_STATES, stateName, tsDate, useNow } from "./format.ts";
import { Labels } from "./labels.tsx";
import { runHref } from "./route.ts";
import { useSession } from "./session.ts";
import { visibleText } from "./shown-text.ts";
import { StateBadge } from "./state-badge.tsx";

export function RunsPage() {
  const { api } = useSession();
  const [state, setState] = useState<RunState>(RunState.UNSPECIFIED);
  const [runs, setRuns] = useState<Run[] | undefined>(undefined);
  const [error, setError] = useState("");
  const now = useNow();

  const load = useCallback(async () => {
    try {
      const res = await api.listRuns({ state, pageSize: 50 });
      setRuns(res.runs);
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  }, [api, state]);
  useEffect(() => {
    void load();
  }, [load]);
  const status = useFeed(api, ["run.*", "approval.*"], load);

  return (
    <section aria-labelledby="runs-h">
      <div class="page-head">
        <h1 id="runs-h">Runs</h1>
        <label class="filter">
          State{" "}
          <select
            value={String(state)}
            onChange={(e) => setState(Number(e.currentTarget.value) as RunState)}
          >
            <option value={String(RunState.UNSPECIFIED)}>all</option>
            {FILTER_STATES.map((s) => (
              <option key={s} value={String(s)}>
                {stateName(s)}
              </option>
            ))}
          </select>
        </label>
        <span class={`feed feed-${status}`} role="status">
          {status === "live" ? "live" : status === "connecting" ? "connecting…" : "reconnecting…"}
        </span>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="sr-only" aria-live="polite">
        {runs === undefined ? "" : summary(runs)}
      </p>
      {runs === undefined && !error && <p>Loading…</p>}
      {runs !== undefined && runs.length === 0 && <p>No runs{state ? " in this state" : ""}.</p>}
      {runs !== undefined && runs.length > 0 && (
        <table class="runs">
          <caption class="sr-only">Runs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">State</th>
              <th scope="col">Labels</th>
              <th scope="col">Age</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.runId} data-testid={`run-row-${r.runId}`}>
                <td data-label="Run">
                  <a href={runHref(r.runId)} class="mono">
                    {r.runId}
                  </a>
                  {r.prompt && <div class="prompt-line">{visibleText(r.prompt)}</div>}
                </td>
                <td data-label="State">
                  <StateBadge state={r.state} testid="run-state" />
                  {r.pendingApprovalId && (
                    <a class="waits" href={runHref(r.runId)}>
                      waits for a person
                    </a>
                  )}
                </td>
                <td data-label="Labels">
                  <Labels labels={r.labels} />
                </td>
                <td data-label="Age">{ago(tsDate(r.createdAt), now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** What the live region says when the list changes. */
function summary(runs: Run[]): string {
  const waiting = runs.filter((r) => r.pendingApprovalId !== "").length;
  const running = runs.filter((r) => r.state === RunState.RUNNING).length;
  return `${runs.length} runs, ${running} running, ${waiting} waiting for a person.`;
}
