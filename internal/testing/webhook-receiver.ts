/**
 * A webhook receiver for tests: an HTTP server on port 0 that checks every delivery's
 * signature (as docs/observability.md tells receivers to) and keeps what it got. `answer`
 * decides per delivery: a status, or "hang" (never answers).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SIGNATURE_HEADER, verifySignature } from "../export/webhook.ts";

export interface Delivery {
  eventId: string;
  type: string;
  runId: string;
  cursor: string;
  attempt: number;
  body: string;
  signed: boolean;
  at: number;
}

export interface WebhookReceiver {
  url: string;
  deliveries: Delivery[];
  /** Deliveries answered 2xx, by event id: how many times each. */
  accepted: Map<string, number>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(
  key: Buffer,
  answer: (d: Delivery) => number | "hang" = () => 200,
): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  const accepted = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const h = (n: string) => String(req.headers[n] ?? "");
      const d: Delivery = {
        eventId: h("x-agentd-event-id"),
        type: h("x-agentd-event-type"),
        runId: h("x-agentd-run-id"),
        cursor: h("x-agentd-cursor"),
        attempt: Number(h("x-agentd-delivery-attempt")),
        body,
        signed: verifySignature(key, h(SIGNATURE_HEADER), body),
        at: Date.now(),
      };
      deliveries.push(d);
      const a = answer(d);
      if (a === "hang") return;
      if (a >= 200 && a < 300) accepted.set(d.eventId, (accepted.get(d.eventId) ?? 0) + 1);
      res.writeHead(a).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    accepted,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
