/**
 * Webhook delivery: one POST per event, the body the event's stored canonical JSON (the
 * bytes its hash covers), signed with HMAC-SHA256 over `<timestamp>.<body>`:
 *
 *   X-Agentd-Signature: t=<unix seconds>,v1=<hex>
 *
 * plus X-Agentd-Event-Id, X-Agentd-Event-Type, X-Agentd-Run-Id, X-Agentd-Cursor and
 * X-Agentd-Delivery-Attempt. Any 2xx is delivered; anything else (or no answer within the
 * timeout) is an error the runner retries. Must never: follow a redirect (a 3xx is an
 * error: the key signs for one receiver), or put the key anywhere but in the HMAC.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { FeedItem } from "../api/tenant-feed.ts";
import type { WebhookConfig } from "./config.ts";

export const SIGNATURE_HEADER = "x-agentd-signature";

export function sign(key: Buffer, timestamp: number, body: string): string {
  const mac = createHmac("sha256", key).update(`${timestamp}.${body}`).digest("hex");
  return `t=${timestamp},v1=${mac}`;
}

/**
 * Checks a signature header as a receiver should: the HMAC matches (constant time) and the
 * timestamp is within `toleranceS` of now (a replayed old delivery is refused).
 */
export function verifySignature(
  key: Buffer,
  header: string,
  body: string,
  now = Date.now(),
  toleranceS = 300,
): boolean {
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header);
  if (m === null) return false;
  const t = Number(m[1]);
  if (Math.abs(now / 1000 - t) > toleranceS) return false;
  const want = Buffer.from(sign(key, t, body).slice(-64), "hex");
  return timingSafeEqual(want, Buffer.from(m[2] as string, "hex"));
}

export async function deliverWebhook(
  sink: WebhookConfig,
  item: FeedItem,
  attempt: number,
  stop?: AbortSignal,
  now = Date.now(),
): Promise<void> {
  const body = item.event.json;
  const res = await fetch(sink.url, {
    method: "POST",
    redirect: "manual",
    signal:
      stop === undefined
        ? AbortSignal.timeout(sink.timeoutMs)
        : AbortSignal.any([AbortSignal.timeout(sink.timeoutMs), stop]),
    headers: {
      ...sink.headers,
      "content-type": "application/json",
      "user-agent": "agentd-export",
      [SIGNATURE_HEADER]: sign(sink.key, Math.floor(now / 1000), body),
      "x-agentd-event-id": item.event.event.eventId,
      "x-agentd-event-type": item.event.type,
      "x-agentd-run-id": item.event.runId,
      "x-agentd-cursor": item.cursor,
      "x-agentd-delivery-attempt": String(attempt),
    },
    body,
  });
  // The answer's body is not needed: drop it so the connection can be reused.
  await res.body?.cancel().catch(() => undefined);
  if (res.status < 200 || res.status >= 300) throw new Error(`HTTP ${res.status}`);
}
