/**
 * A real OTLP/HTTP receiver for tests (JSON encoding: OTEL_EXPORTER_OTLP_PROTOCOL=http/json):
 * an HTTP server on port 0 that keeps every span and log record it is sent, flattened with
 * its resource's attributes. Answers as the OTLP spec says (200 with an empty partial
 * success), so exporters never retry.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export type AttrValue = string | number | boolean | AttrValue[] | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, AttrValue>;
  resource: Record<string, AttrValue>;
  status: { code?: number; message?: string };
  /** Decimal nanoseconds since the epoch, as sent. */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  events: { name: string; timeUnixNano: string; attributes: Record<string, AttrValue> }[];
  links: { traceId: string; spanId: string; attributes: Record<string, AttrValue> }[];
}

export interface ReceivedLog {
  /** The record's time (decimal nanoseconds since the epoch, as sent); "" when absent. */
  timeUnixNano: string;
  /** When the exporter observed it; "" when absent. */
  observedTimeUnixNano: string;
  traceId: string;
  spanId: string;
  body: AttrValue;
  attributes: Record<string, AttrValue>;
  resource: Record<string, AttrValue>;
}

export interface OtlpReceiver {
  /** "http://127.0.0.1:PORT": OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  logs: ReceivedLog[];
  /** Request paths seen, in order. */
  paths: string[];
  close(): Promise<void>;
}

type OtlpAttr = { key: string; value: OtlpValue };
type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
};

function otlpValue(v: OtlpValue | undefined): AttrValue {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(otlpValue);
  return undefined;
}

export function attrs(list: OtlpAttr[] | undefined): Record<string, AttrValue> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, otlpValue(a.value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const logs: ReceivedLog[] = [];
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      paths.push(req.url ?? "");
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        if (req.url === "/v1/traces") collectSpans(body, spans);
        if (req.url === "/v1/logs") collectLogs(body, logs);
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    logs,
    paths,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

// biome-ignore lint/suspicious/noExplicitAny: OTLP/JSON as it arrives
function collectSpans(body: any, out: ReceivedSpan[]): void {
  for (const rs of body.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: s.kind,
          attributes: attrs(s.attributes),
          resource,
          status: s.status ?? {},
          startTimeUnixNano: String(s.startTimeUnixNano ?? ""),
          endTimeUnixNano: String(s.endTimeUnixNano ?? ""),
          // biome-ignore lint/suspicious/noExplicitAny: OTLP/JSON as it arrives
          events: (s.events ?? []).map((e: any) => ({
            name: e.name,
            timeUnixNano: String(e.timeUnixNano ?? ""),
            attributes: attrs(e.attributes),
          })),
          // biome-ignore lint/suspicious/noExplicitAny: OTLP/JSON as it arrives
          links: (s.links ?? []).map((l: any) => ({
            traceId: l.traceId,
            spanId: l.spanId,
            attributes: attrs(l.attributes),
          })),
        });
  }
}

// biome-ignore lint/suspicious/noExplicitAny: OTLP/JSON as it arrives
function collectLogs(body: any, out: ReceivedLog[]): void {
  for (const rl of body.resourceLogs ?? []) {
    const resource = attrs(rl.resource?.attributes);
    for (const sl of rl.scopeLogs ?? [])
      for (const r of sl.logRecords ?? [])
        out.push({
          timeUnixNano: String(r.timeUnixNano ?? ""),
          observedTimeUnixNano: String(r.observedTimeUnixNano ?? ""),
          traceId: r.traceId ?? "",
          spanId: r.spanId ?? "",
          body: otlpValue(r.body),
          attributes: attrs(r.attributes),
          resource,
        });
  }
}
