/** Everything pending for the tenant, oldest first, refreshed live. */
import { useCallback, useEffect, useState } from "preact/hooks";
import type { Approval } from "../../gen/agentd/v1/run_service_pb.js";
import { errorText } from "./api.ts";
import { ApprovalCard } from "./approval-card.tsx";
import { useFeed } from "./feed.ts";
import { ago, tsDate, useNow } from "./format.ts";
import { useSession } from "./session.ts";

function requestedMs(a: Approval): number {
  return tsDate(a.requestedAt)?.getTime() ?? 0;
}

export function ApprovalsPage() {
  const { api } = useSession();
  const [approvals, setApprovals] = useState<Approval[] | undefined>(undefined);
  const [error, setError] = useState("");
  const now = useNow();

  const load = useCallback(async () => {
    try {
      const res = await api.listApprovals({ pageSize: 500 });
      setApprovals([...res.approvals].sort((a, b) => requestedMs(a) - requestedMs(b)));
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  }, [api]);
  useEffect(() => {
    void load();
  }, [load]);
  useFeed(api, ["approval.*", "run.*"], load);

  return (
    <section aria-labelledby="approvals-h">
      <h1 id="approvals-h">Approvals</h1>
      <p aria-live="polite">
        {approvals === undefined
          ? "Loading…"
          : approvals.length === 0
            ? "Nothing waits for a decision."
            : `${approvals.length} pending, oldest first.`}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="cards">
        {approvals?.map((a) => (
          <ApprovalCard
            key={a.approvalId}
            showRun
            level={2}
            onResolved={load}
            approval={{
              approvalId: a.approvalId,
              runId: a.runId,
              tool: a.tool,
              preview: a.preview,
              age: ago(tsDate(a.requestedAt), now),
              pending: true,
            }}
          />
        ))}
      </div>
    </section>
  );
}
