/**
 * The API client: Connect over fetch on the page's own origin, the token as a bearer
 * header on every call (never in a URL).
 */
import { type Client, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { RunService } from "../../gen/agentd/v1/run_service_pb.js";

export type Api = Client<typeof RunService>;

export function createApi(token: string): Api {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: location.origin,
    useBinaryFormat: true,
    interceptors: [bearer],
  });
  return createClient(RunService, transport);
}

/** A short, human message for an error of a call. */
export function errorText(err: unknown): string {
  if (err instanceof ConnectError) return err.rawMessage || err.message;
  return err instanceof Error ? err.message : String(err);
}
