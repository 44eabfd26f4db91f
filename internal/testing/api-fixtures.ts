/**
 * Fixtures of the API integration tests: tokens and their auth file, a whole stack (private
 * Redis + real `agentd server` + an EventLog on the same Redis + a grpc-js client), event
 * payloads to append as a worker would, and the system `curl` binary as an SSE client.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import {
  OutputDeltaSchema,
  RunCompletedSchema,
  RunStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { Run } from "../gen/agentd/v1/run_service_pb.js";
import {
  type AgentdOptions,
  type AgentdProcess,
  startAgentd,
  type TestToken,
  writeAuthFile,
} from "./agentd-process.ts";
import { GrpcRunClient } from "./grpc-run-client.ts";
import { startRedis, type TestRedis } from "./redis-server.ts";

/** Bearer tokens of the tests (random per process, so no run of the suite reuses one). */
const salt = Math.random().toString(36).slice(2);
export const TOKENS = {
  /** tenant acme, every role */
  acme: `acme-${salt}-all`,
  /** tenant acme, read only */
  acmeReader: `acme-${salt}-read`,
  /** tenant globex, every role */
  globex: `globex-${salt}-all`,
  /** tenant initech, every role (the ListRuns tests own this tenant) */
  initech: `initech-${salt}-all`,
} as const;

export const AUTH: readonly TestToken[] = [
  { token: TOKENS.acme, tenant: "acme", roles: ["submit", "read", "approve", "admin"] },
  { token: TOKENS.acmeReader, tenant: "acme", roles: ["read"] },
  { token: TOKENS.globex, tenant: "globex", roles: ["submit", "read", "approve", "admin"] },
  { token: TOKENS.initech, tenant: "initech", roles: ["submit", "read", "approve", "admin"] },
];

export interface Stack {
  dir: string;
  authFile: string;
  redis: TestRedis;
  server: AgentdProcess;
  /** The event log on the server's Redis and prefix: the test appends as a worker would. */
  log: RedisEventLog;
  /** A grpc-js client of `server` with acme's token. */
  client: GrpcRunClient;
  /** The flags `server` was started with (pass them again to start another on the same Redis). */
  flags: string[];
  /** Another `agentd server` on the same Redis, auth file and prefix. */
  startServer(opts?: AgentdOptions): Promise<AgentdProcess>;
  stop(): Promise<void>;
}

/** The ACL user the stack's agentd processes log in as (deploy/'s: `~agentd:*`, no admin). */
const SERVICE_USER = { name: "agentd", password: "stackServicePw", keys: "agentd:*" };

/** Temp dir with the auth file, a private Redis, and a real `agentd server` on it. */
export async function startStack(serverOpts?: AgentdOptions): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), "agentd-it-"));
  const authFile = writeAuthFile(dir, AUTH);
  // agentd logs in as the deployments' ACL user does: its own keys only (`~agentd:*`), no
  // admin commands; a key outside the prefix fails the test with NOPERM. (The password in
  // the URL keeps `flags` whole for the tests that start more processes with them.)
  const redis = await startRedis({ serviceUser: SERVICE_USER });
  const flags = [
    "--event-log",
    `redis://${SERVICE_USER.name}:${SERVICE_USER.password}@127.0.0.1:${redis.port}`,
    "--auth-file",
    authFile,
    "--artifact-dir",
    join(dir, "artifacts"),
  ];
  const extra: AgentdProcess[] = [];
  const startServer = async (opts?: AgentdOptions): Promise<AgentdProcess> => {
    const p = await startAgentd("server", flags, opts);
    extra.push(p);
    return p;
  };
  let server: AgentdProcess;
  try {
    server = await startServer(serverOpts);
  } catch (err) {
    await redis.stop();
    throw err;
  }
  const log = new RedisEventLog({ client: redis.client(), prefix: "agentd:" });
  const client = new GrpcRunClient(server.addr, TOKENS.acme);
  return {
    dir,
    authFile,
    redis,
    server,
    log,
    client,
    flags,
    startServer,
    async stop() {
      client.close();
      await log.close();
      await Promise.allSettled(extra.map((p) => p.stop("SIGKILL")));
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const payload = {
  started: (): EventPayload => ({
    case: "runStarted",
    value: create(RunStartedSchema, { workerId: "test-worker", epoch: 1n, image: "test" }),
  }),
  delta: (text: string): EventPayload => ({
    case: "outputDelta",
    value: create(OutputDeltaSchema, { text }),
  }),
  completed: (summary = "done"): EventPayload => ({
    case: "runCompleted",
    value: create(RunCompletedSchema, { summary, usage: { inputTokens: 3n, outputTokens: 5n } }),
  }),
};

/** Appends payloads to a run as a worker would (no fence), in order; returns the last seq. */
export async function appendEvents(
  log: RedisEventLog,
  run: Pick<Run, "runId" | "sessionId">,
  payloads: readonly EventPayload[],
): Promise<number> {
  let seq = 0;
  for (const p of payloads) {
    const ev = await log.append({ runId: run.runId, sessionId: run.sessionId, payload: p });
    seq = ev.seq;
  }
  return seq;
}

/** `n` output deltas. */
export function deltas(n: number, tag = "chunk"): EventPayload[] {
  return Array.from({ length: n }, (_, i) => payload.delta(`${tag} ${i}`));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A running `curl` (HTTP/1.1, headers included in the output). */
export interface CurlRun {
  /** stdout so far. */
  output(): string;
  /** Resolves with the exit code and whole stdout once curl exits. */
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Resolves once stdout matches `re`; rejects after `timeoutMs` or when curl exits first. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<void>;
  kill(): void;
}

/** Starts the system curl: `curl -sS -i -N --http1.1 --max-time 20 ...args`. */
export function startCurl(args: readonly string[]): CurlRun {
  const child = spawn("curl", ["-sS", "-i", "-N", "--http1.1", "--max-time", "20", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const listeners = new Set<() => void>();
  child.stdout.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
    for (const l of listeners) l();
  });
  child.stderr.setEncoding("utf8").on("data", (s: string) => {
    stderr += s;
  });
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    child.once("close", (code) => {
      for (const l of listeners) l();
      resolve({ code, stdout, stderr });
    });
  });
  return {
    output: () => stdout,
    done,
    waitFor(re, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (re.test(stdout)) finish();
          else if (child.exitCode !== null || child.signalCode !== null)
            finish(new Error(`curl exited before printing ${re}:\n${stdout}\n${stderr}`));
        };
        const timer = setTimeout(
          () => finish(new Error(`curl output did not match ${re} in ${timeoutMs} ms:\n${stdout}`)),
          timeoutMs,
        );
        const finish = (err?: Error): void => {
          clearTimeout(timer);
          listeners.delete(check);
          if (err) reject(err);
          else resolve();
        };
        listeners.add(check);
        check();
      });
    },
    kill: () => child.kill("SIGKILL"),
  };
}

/** An HTTP response as curl -i printed it. */
export interface HttpResult {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits `curl -i` output into status, headers (lowercase names) and body. */
export function parseCurlOutput(out: string): HttpResult {
  const end = out.indexOf("\r\n\r\n");
  const head = end < 0 ? out : out.slice(0, end);
  const body = end < 0 ? "" : out.slice(end + 4);
  const [statusLine = "", ...lines] = head.split("\r\n");
  const m = /^HTTP\/[\d.]+ (\d{3})/.exec(statusLine);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(":");
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: m ? Number(m[1]) : 0, headers, body };
}

/** Runs curl to completion and parses its output. */
export async function curl(args: readonly string[]): Promise<HttpResult> {
  const r = await startCurl(args).done;
  if (r.code !== 0) throw new Error(`curl exited ${r.code}: ${r.stderr}`);
  return parseCurlOutput(r.stdout);
}

/** One Server-Sent Event. */
export interface SseEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/** The events of an SSE body (comments and keepalives skipped). */
export function parseSse(body: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    let id: string | undefined;
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line === "" || line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (id !== undefined || event !== undefined || data.length > 0)
      out.push({ id, event, data: data.join("\n") });
  }
  return out;
}

/** 1, 2, … n. */
export function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
