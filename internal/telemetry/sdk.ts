/**
 * Starts the OpenTelemetry Node SDK when the standard OTEL_* variables ask for traces
 * (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
 * the SDK reads the rest itself). Otherwise nothing is loaded and spans stay no-ops.
 */
export interface TracingHandle {
  shutdown(): Promise<void>;
}

export async function startTracing(
  env: Record<string, string | undefined>,
  serviceName: string,
): Promise<TracingHandle | undefined> {
  if (env.OTEL_SDK_DISABLED === "true") return undefined;
  const wanted =
    (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER !== "none") ||
    env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined ||
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
  if (!wanted) return undefined;
  // agentd's metrics are Prometheus's (/metrics) and its events go out through the export
  // sinks: the SDK's own OTLP metrics and logs stay off unless asked for by name.
  process.env.OTEL_METRICS_EXPORTER ??= "none";
  process.env.OTEL_LOGS_EXPORTER ??= "none";
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({ serviceName: env.OTEL_SERVICE_NAME ?? serviceName });
  sdk.start();
  return { shutdown: () => sdk.shutdown() };
}
