/**
 * GET /v1/events as Server-Sent Events: the tenant-wide feed (WatchEvents) for browsers and
 * curl. Query: `types=a,b` (or repeated), `labels=<selector>`, `from_oldest=true`, and
 * `cursor=`; the standard `Last-Event-ID` header wins over `cursor` (each event's `id:` is
 * its cursor, so EventSource-style clients resume by themselves).
 */
import type { ApiDeps } from "../api/deps.ts";
import { openTenantFeed, planFeed, watchSlot } from "../api/tenant-feed.ts";
import type { Authenticator } from "../auth/tokens.ts";
import { invalid } from "../errors.ts";
import { type Res, serveSseStream } from "./sse.ts";

export const WATCH_SSE_PATH = "/v1/events";

type Req = Parameters<typeof serveSseStream>[1];

export function serveWatchSse(
  deps: ApiDeps,
  auth: Authenticator,
  req: Req,
  res: Res,
  url: URL,
  onError: (err: unknown, incident?: string) => void,
): Promise<void> {
  return serveSseStream(auth, req, res, onError, "watch", async (principal, lastId, signal) => {
    const q = url.searchParams;
    const fromOldest = q.get("from_oldest") ?? "false";
    if (fromOldest !== "true" && fromOldest !== "false")
      throw invalid("from_oldest", "must be true or false");
    const types = q
      .getAll("types")
      .flatMap((t) => t.split(","))
      .filter((t) => t !== "");
    const cursorField = lastId !== undefined ? "Last-Event-ID" : "cursor";
    const plan = planFeed(
      {
        cursor: lastId ?? q.get("cursor") ?? "",
        fromOldest: fromOldest === "true",
        types,
        labelSelector: q.get("labels") ?? "",
      },
      { cursor: cursorField, types: "types", labels: "labels" },
    );
    // Opened here, before the 200: a stale cursor is answered as OUT_OF_RANGE (416-free
    // JSON error), not as a stream that ends (EventSource would reconnect forever).
    const release = watchSlot(principal.tenantId);
    let items: Awaited<ReturnType<typeof openTenantFeed>>;
    try {
      items = await openTenantFeed(deps, principal.tenantId, plan, signal);
    } catch (err) {
      release();
      throw err;
    }
    return (async function* () {
      try {
        for await (const it of items)
          yield { id: it.cursor, type: it.event.type, data: it.event.json };
      } finally {
        release();
      }
    })();
  });
}
