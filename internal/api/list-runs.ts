/**
 * ListRuns: the tenant's runs newest first, filtered by state, session and a label
 * selector (labels.ts), paginated. The state and label filters are applied to projections, so one call examines a bounded number of
 * runs and may return a short page with a next token: keep paging until the token is empty.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { invalid } from "../errors.ts";
import {
  type ListRunsRequest,
  type ListRunsResponseSchema,
  type Run,
  RunState,
} from "../gen/agentd/v1/run_service_pb.js";
import { principalOf } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { matchesSelector, parseSelector } from "./labels.ts";
import { addQueueStanding } from "./queue-standing.ts";
import { decodePageToken, encodePageToken, pageSizeField, SESSION_RE } from "./validate.ts";

/** Most runs one call looks at when a state filter skips many. */
const MAX_EXAMINED = 5000;

export function listRunsHandler(deps: ApiDeps) {
  return async (
    req: ListRunsRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof ListRunsResponseSchema>> => {
    const principal = principalOf(ctx);
    if (!(req.state in RunState)) throw invalid("state", `unknown run state ${req.state}`);
    if (req.sessionId !== "" && !SESSION_RE.test(req.sessionId)) {
      throw invalid("session_id", "must be 1-128 characters of [A-Za-z0-9._:-]");
    }
    const pageSize = pageSizeField("page_size", req.pageSize, 50, 500);
    const selector = parseSelector(req.labelSelector);
    const binding = { st: String(req.state), se: req.sessionId, ls: req.labelSelector };
    let before: string | undefined;
    if (req.pageToken !== "") before = decodePageToken("page_token", req.pageToken, binding).b;
    const runs: Run[] = [];
    let examined = 0;
    let next: string | undefined;
    for (;;) {
      const page = await deps.log.listRunIds({
        tenantId: principal.tenantId,
        sessionId: req.sessionId || undefined,
        before,
        limit: pageSize,
      });
      const projected = await deps.runs.getMany(page.runIds);
      let i = 0;
      for (; i < projected.length && runs.length < pageSize; i++) {
        const r = projected[i];
        if (r === undefined) continue;
        if (req.state !== RunState.UNSPECIFIED && r.state !== req.state) continue;
        if (matchesSelector(r.labels, selector)) runs.push(r);
      }
      examined += i;
      const lastSeen = page.runIds[i - 1];
      const moreHere = i < page.runIds.length;
      if (runs.length >= pageSize || examined >= MAX_EXAMINED) {
        next = moreHere || page.next !== undefined ? lastSeen : undefined;
        break;
      }
      if (page.next === undefined) break;
      before = page.next;
    }
    // Queued runs say where they stand and what holds them (one queue read each, in parallel).
    await Promise.all(runs.map((r) => addQueueStanding(deps, r)));
    return {
      runs,
      nextPageToken: next === undefined ? "" : encodePageToken({ ...binding, b: next }),
    };
  };
}
