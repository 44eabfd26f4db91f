/**
 * A run's events as a hook (follow-run.ts does the following: reconnects, resyncs, the
 * link check). A refused token sends the page back to the token form.
 */
import { useContext, useEffect, useState } from "preact/hooks";
import type { Event } from "../../gen/agentd/v1/events_pb.js";
import { type Api, errorText } from "./api.ts";
import { followRun, type StreamStatus } from "./follow-run.ts";
import { SessionContext } from "./session.ts";

export type { StreamStatus } from "./follow-run.ts";

export function useRunEvents(
  api: Api,
  runId: string,
  onEvents: (events: Event[]) => void,
  onResync?: () => void,
): { status: StreamStatus; error: string } {
  const [status, setStatus] = useState<StreamStatus>("connecting");
  const [error, setError] = useState("");
  const session = useContext(SessionContext);
  useEffect(() => {
    const ac = new AbortController();
    void followRun(
      api,
      runId,
      {
        onEvents,
        ...(onResync === undefined ? {} : { onResync }),
        onStatus: setStatus,
        onError: (err) => setError(err === "" ? "" : errorText(err)),
        onRefused: (err) => session?.signOut(`Your token was refused: ${errorText(err)}`),
      },
      ac.signal,
    );
    return () => ac.abort();
  }, [api, runId, onEvents, onResync]);
  return { status, error };
}
