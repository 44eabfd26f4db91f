/**
 * The RunService client of agentctl (gRPC over HTTP/2, or TLS for https:// addresses),
 * where its address and token come from, and error messages that say what to do.
 */

import { readFileSync } from "node:fs";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import { tlsProblem } from "../../clients/typescript/src/tls-problem.ts";
import {
  callHeaders,
  createRunClient,
  isTransient,
  systemCode,
} from "../../clients/typescript/src/transport.ts";
import type { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { BadRequestSchema } from "../gen/google/rpc/error_details_pb.js";
import { configPath, expandHome, loadContexts, readTokenFile, selectContext } from "./contexts.ts";

export { isTransient };

export type RunClient = Client<typeof RunService>;

/** Exit codes of agentctl (documented in `agentctl --help`). */
export const EXIT = {
  /** Success; for a run: it completed. */
  OK: 0,
  /** The run failed (or `verify` found a broken chain). */
  FAILED: 1,
  /** The run was cancelled. */
  CANCELLED: 2,
  /** The run waits for a person (--no-wait, wait --for approval), or has not ended (replay). */
  WAITING: 3,
  /** The request failed: server unreachable, refused, not found… (the message says). */
  ERROR: 4,
  /** Bad command line. */
  USAGE: 64,
  /** Interrupted (Ctrl-C). */
  INTERRUPTED: 130,
} as const;

export const DEFAULT_ADDR = "http://127.0.0.1:7070";

export interface Endpoint {
  /** Base URL, e.g. http://127.0.0.1:7070 */
  url: string;
  /** Where the address came from, for error messages. */
  addrSource: "--addr" | "AGENTD_ADDR" | "default" | `context ${string}`;
  token: string | undefined;
  tokenSource: "--token" | "AGENTD_TOKEN" | `context ${string}` | undefined;
  /** The CA file to trust for https:// (PEM), when one was given, and where it came from. */
  ca?: { file: string; pem: string; source: "--ca-file" | "AGENTD_CA_FILE" | `context ${string}` };
  /** The W3C trace context continued from TRACEPARENT/TRACESTATE (a CI job's). */
  trace?: { traceparent: string; tracestate?: string };
}

/** A command-line mistake: agentctl prints it with a pointer to --help and exits 64. */
export class UsageError extends Error {
  override name = "UsageError";
  readonly command: string | undefined;
  constructor(message: string, command?: string) {
    super(message);
    this.command = command;
  }
}

/** An error whose message already says what to do; printed as is, exit 4 (or `code`). */
export class CliError extends Error {
  override name = "CliError";
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.ERROR) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Flags win over the environment, which wins over the default. */
export function resolveEndpoint(
  flags: {
    addr?: string | undefined;
    token?: string | undefined;
    context?: string | undefined;
    caFile?: string | undefined;
  },
  env: NodeJS.ProcessEnv = process.env,
): Endpoint {
  const fromFlags = flags.addr !== undefined && flags.addr !== "";
  const fromEnv = env.AGENTD_ADDR !== undefined && env.AGENTD_ADDR !== "";
  // The context file is read only when it matters: an explicit address needs none, unless
  // a context is asked for by name.
  const ctx =
    (fromFlags || fromEnv) && !flags.context && !env.AGENTD_CONTEXT
      ? undefined
      : contextOf(flags, env);
  let raw: string;
  let addrSource: Endpoint["addrSource"];
  if (fromFlags) {
    raw = flags.addr as string;
    addrSource = "--addr";
  } else if (fromEnv) {
    raw = env.AGENTD_ADDR as string;
    addrSource = "AGENTD_ADDR";
  } else if (ctx !== undefined) {
    raw = ctx.context.addr;
    addrSource = `context ${ctx.name}`;
  } else {
    raw = DEFAULT_ADDR;
    addrSource = "default";
  }
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(
      `${addrSource === "default" ? "address" : addrSource} ${JSON.stringify(raw)} is not an address: give HOST:PORT or http(s)://HOST:PORT`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new UsageError(
      `${addrSource} ${JSON.stringify(raw)}: only http:// (h2c) and https:// addresses are supported`,
    );
  }
  let token: string | undefined;
  let tokenSource: Endpoint["tokenSource"];
  if (flags.token !== undefined && flags.token !== "") {
    token = flags.token;
    tokenSource = "--token";
  } else if (env.AGENTD_TOKEN !== undefined && env.AGENTD_TOKEN !== "") {
    token = env.AGENTD_TOKEN;
    tokenSource = "AGENTD_TOKEN";
  } else if (ctx?.context["token-file"] !== undefined) {
    token = readTokenFile(ctx.name, ctx.context["token-file"], ctx.path);
    tokenSource = `context ${ctx.name}`;
  }
  const ep: Endpoint = { url: url.replace(/\/+$/, ""), addrSource, token, tokenSource };
  const ca =
    flags.caFile !== undefined && flags.caFile !== ""
      ? { file: flags.caFile, source: "--ca-file" as const }
      : env.AGENTD_CA_FILE !== undefined && env.AGENTD_CA_FILE !== ""
        ? { file: env.AGENTD_CA_FILE, source: "AGENTD_CA_FILE" as const }
        : ctx?.context["ca-file"] !== undefined
          ? {
              file: expandHome(ctx.context["ca-file"], ctx.path),
              source: `context ${ctx.name}` as const,
            }
          : undefined;
  if (ca !== undefined) ep.ca = { ...ca, pem: readCaFile(ca.file, ca.source) };
  const trace = traceFromEnv(env);
  if (trace !== undefined) ep.trace = trace;
  return ep;
}

/** A PEM file of one or more CA certificates; a UsageError names the file and its source. */
function readCaFile(file: string, source: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(
      `${source} ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  if (!pem.includes("-----BEGIN CERTIFICATE-----"))
    throw new UsageError(
      `${source} ${file}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)`,
    );
  return pem;
}

/**
 * TRACEPARENT and TRACESTATE of the environment (the convention CI systems and
 * OpenTelemetry's env carriers use): the run joins the caller's trace.
 */
function traceFromEnv(env: NodeJS.ProcessEnv): Endpoint["trace"] {
  const traceparent = env.TRACEPARENT;
  if (traceparent === undefined || traceparent === "") return undefined;
  const tracestate =
    env.TRACESTATE === undefined || env.TRACESTATE === "" ? undefined : env.TRACESTATE;
  try {
    callHeaders({ address: "", traceparent, tracestate });
  } catch (err) {
    throw new UsageError(
      `${/^tracestate/.test((err as Error).message) ? "TRACESTATE" : "TRACEPARENT"}: ${(err as Error).message}`,
    );
  }
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

export function connect(ep: Endpoint): RunClient {
  return createRunClient({
    address: ep.url,
    token: ep.token,
    ca: ep.ca?.pem,
    traceparent: ep.trace?.traceparent,
    tracestate: ep.trace?.tracestate,
  });
}

/** Flag (or argument) of agentctl that sets a request field, for INVALID_ARGUMENT. */
const FIELD_FLAGS: [RegExp, string][] = [
  [/^prompt$/, "--prompt"],
  [/^session_id$/, "--session"],
  [/^priority$/, "--priority"],
  [/^image$/, "--image"],
  [/^skills(\[\d+\])?$/, "--skill"],
  [/^labels/, "--label"],
  [/^workspace_tar$/, "workspace (--repo)"],
  [/^after_seq$/, "--from-seq"],
  [/^page_size$/, "--limit"],
  [/^page_token$/, "--page-token"],
  [/^approval_id$/, "approval ID"],
  [/^run_id$/, "RUN id"],
  [/^reason$/, "--reason"],
  [/^digest$/, "--digest"],
  [/^name$/, "--name"],
  [/^state$/, "--state"],
];

function flagOf(field: string): string | undefined {
  return FIELD_FLAGS.find(([re]) => re.test(field))?.[1];
}

/** What the failed request was about, to name it in the message. */
export interface ErrorContext {
  runId?: string | undefined;
  approvalId?: string | undefined;
  artifact?: string | undefined;
}

/** Node's system error code (ECONNREFUSED…) somewhere in the cause chain, if any. */

function addrHint(ep: Endpoint): string {
  return ep.addrSource === "default"
    ? "no --addr or AGENTD_ADDR was given, so the default"
    : `from ${ep.addrSource}`;
}

/** A message for `err` that names what failed and what to do about it. */
export function explainError(err: unknown, ep: Endpoint, ctx: ErrorContext = {}): string {
  if (!(err instanceof ConnectError)) return (err as Error)?.message ?? String(err);
  const msg = err.rawMessage;
  const tls = tlsProblem(err);
  if (tls !== undefined) {
    const fix = !tls.untrusted
      ? ""
      : ep.ca !== undefined
        ? `; ${ep.ca.file} (${ep.ca.source}) is not the CA that signed the server's certificate`
        : "; pass --ca-file FILE (the PEM of the CA that signed it) or set NODE_EXTRA_CA_CERTS=FILE";
    return `cannot reach ${ep.url} (${addrHint(ep)}): ${tls.text} (${tls.code})${fix}.`;
  }
  const sys = systemCode(err.cause);
  if (sys !== undefined || (err.code === Code.Unavailable && /PING timed out/.test(msg))) {
    return (
      `cannot reach agentd at ${ep.url} (${addrHint(ep)}): ${msg}.\n` +
      `Start it (bin/agentd dev --listen 127.0.0.1:7070) or point agentctl at it with --addr HOST:PORT or AGENTD_ADDR=http://HOST:PORT.`
    );
  }
  switch (err.code) {
    case Code.Unauthenticated:
      return ep.token === undefined
        ? `agentd at ${ep.url} wants a token (${msg}): set AGENTD_TOKEN or pass --token TOKEN.`
        : `agentd at ${ep.url} refused the token from ${ep.tokenSource} (${msg}): check AGENTD_TOKEN / --token; the server's auth file lists the tokens' sha256 (bin/agentd hash-token TOKEN).`;
    case Code.PermissionDenied:
      return `permission denied: ${msg}. Your token lacks the role for this call (submit: run/cancel; read: runs/get/events/approvals/artifact; approve: approve/deny); ask the operator to add it in the auth file.`;
    case Code.NotFound: {
      const what =
        ctx.artifact !== undefined
          ? `${msg}. Runs have "workspace" (the upload), "patch" (once completed) and "workspace-snapshot" (after a pause); agentctl events ${ctx.runId ?? "RUN"} lists artifact.emitted.`
          : ctx.approvalId !== undefined
            ? `approval ${ctx.approvalId} not found for your token's tenant (${msg}). List pending ones with: agentctl approvals`
            : ctx.runId !== undefined
              ? `run ${ctx.runId} not found for your token's tenant (${msg}); a run of another tenant looks exactly like a missing one. List yours with: agentctl runs`
              : `not found: ${msg}`;
      return what;
    }
    case Code.InvalidArgument: {
      const fields = err
        .findDetails(BadRequestSchema)
        .flatMap((d) => d.fieldViolations.map((v) => v.field));
      const field = fields[0] ?? /^([a-z_]+(\[[^\]]*\])?)/.exec(msg)?.[1];
      const flag = field === undefined ? undefined : flagOf(field);
      if (flag === undefined || field === undefined) return `invalid request: ${msg}`;
      const text = msg.startsWith(`${field}: `) ? msg.slice(field.length + 2) : msg;
      return `invalid ${flag}: ${text} (field ${field})`;
    }
    case Code.OutOfRange:
      return `${msg}: --from-seq is past the run's last event (agentctl get ${ctx.runId ?? "RUN"} shows the last seq).`;
    case Code.ResourceExhausted:
      return `the server refused the request as too large (${msg}): make the workspace smaller (.gitignore, --repo a subdirectory) or raise the server's --max-request-bytes.`;
    case Code.FailedPrecondition:
      return `${msg}.`;
    case Code.Unimplemented:
      return `the server does not support this yet: ${msg}.`;
    case Code.Unavailable:
      return `agentd at ${ep.url} is unavailable: ${msg}. Its event log may be down (check GET ${ep.url}/readyz and the server log); try again.`;
    case Code.Internal:
      return `agentd failed internally: ${msg}. Report the incident id to the operator (it is in the server log).`;
    case Code.DeadlineExceeded:
      return `agentd at ${ep.url} did not answer in time (${msg}); try again, or check the server.`;
    default:
      return `${Code[err.code] ?? err.code}: ${msg}`;
  }
}

function contextOf(flags: { context?: string | undefined }, env: NodeJS.ProcessEnv) {
  const path = configPath(env);
  const picked = selectContext(loadContexts(path), path, flags.context, env);
  return picked === undefined ? undefined : { ...picked, path };
}
