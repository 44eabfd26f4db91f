/**
 * WatchEvents: the tenant-wide feed (tenant-feed.ts) as a server stream. The stream stays
 * open until the client goes away (or its deadline); each answer carries its cursor.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type {
  WatchEventsRequest,
  WatchEventsResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { metrics } from "../telemetry/metrics.ts";
import { principalOf } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { openTenantFeed, planFeed, watchSlot } from "./tenant-feed.ts";

export function watchEventsHandler(deps: ApiDeps) {
  return async function* (
    req: WatchEventsRequest,
    ctx: HandlerContext,
  ): AsyncGenerator<MessageInitShape<typeof WatchEventsResponseSchema>> {
    const principal = principalOf(ctx);
    const plan = planFeed({
      cursor: req.cursor,
      fromOldest: req.fromOldest,
      types: req.types,
      labelSelector: req.labelSelector,
    });
    const release = watchSlot(principal.tenantId);
    const open = metrics.streamsOpen.labels({ kind: "watch" });
    open.inc();
    try {
      const items = await openTenantFeed(deps, principal.tenantId, plan, ctx.signal);
      for await (const item of items) yield { event: item.event.event, cursor: item.cursor };
    } finally {
      open.dec();
      release();
    }
    // Only the call's signal ends the feed: say why instead of a normal end (OK).
    throw ConnectError.from(ctx.signal.reason ?? "the feed stopped", Code.Canceled);
  };
}
