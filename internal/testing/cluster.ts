/**
 * A whole agentd deployment of real processes for chaos and end-to-end tests: a private
 * redis-server (AOF always), one `bin/agentd server` (no auth), any number of
 * `bin/agentd worker` processes on the same Redis, one scripted OpenAI-compatible stub
 * shared by every worker, a test policy (the repository's policy.yaml on the small `test`
 * sandbox image with small limits) and a shared artifact directory. Every process runs with
 * the same `--lease-ttl-ms`.
 *
 * Must never: leave a process, container or temporary directory behind after stop(), even
 * when a test failed halfway (stop() is safe to call in any state, and more than once).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { parseDocument } from "yaml";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { containerName, LABEL_POOL, LABEL_RUN } from "../sandbox/docker-sandbox.ts";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";
import { type AgentdProcess, startAgentd } from "./agentd-process.ts";
import { requireDocker, sandboxImage } from "./docker.ts";
import { GrpcRunClient } from "./grpc-run-client.ts";
import {
  type OpenAiStub,
  type StubReply,
  type StubRequest,
  startOpenAiStub,
} from "./openai-stub.ts";
import { startRedis, type TestRedis } from "./redis-server.ts";

export interface ClusterOptions {
  /** Worker processes started at once. Default 2. */
  workers?: number;
  /** `--lease-ttl-ms` of every process. Default 3000. */
  leaseTtlMs?: number;
  /** `--concurrency` of each worker. Default 2. */
  concurrency?: number;
  /** More flags for every worker, e.g. ["--approval-hold-ms", "0"]. */
  workerFlags?: string[];
  /** More flags for the server. */
  serverFlags?: string[];
  /** More environment for every process (e.g. OTEL_* variables). */
  env?: Record<string, string>;
  /** Redis' appendfsync. Default "always". */
  appendfsync?: "always" | "everysec";
  /** Settings written into the test policy over its defaults, e.g. [["sandbox", "onLost"], "continue"]. */
  policy?: [path: string[], value: unknown][];
  /** The model: answers every chat-completions request of every worker. */
  script: (req: StubRequest) => StubReply | Promise<StubReply>;
}

export interface Cluster {
  dir: string;
  redis: TestRedis;
  stub: OpenAiStub;
  server: AgentdProcess;
  /** Every worker started so far (dead ones included), in start order. */
  workers: AgentdProcess[];
  /** A grpc-js client of the server (no token: the server runs without auth). */
  client: GrpcRunClient;
  /** The event log on the cluster's Redis, for reads and for appends a test makes itself. */
  log: RedisEventLog;
  /** The run queue on the cluster's Redis (stateOf, positionOf). */
  queue: RedisRunQueue;
  docker: Docker;
  policyFile: string;
  artifactDir: string;
  /** Starts one more worker with the cluster's flags (and `extraFlags`, which win). */
  startWorker(extraFlags?: string[]): Promise<AgentdProcess>;
  /** The live worker whose id (`host:pid`, as in run.started) is `workerId`. */
  workerOf(workerId: string): AgentdProcess | undefined;
  /** Ids of the run's containers, running or not (labelled with it, or a warm one renamed for it). */
  containersOf(runId: string): Promise<string[]>;
  /** Remembers a run, so stop() removes its containers even if the test failed. */
  track(runId: string): void;
  /** The last lines of every process' output, for failure messages. */
  diagnostics(lines?: number): string;
  stop(): Promise<void>;
}

/** The repository's policy.yaml on the `test` image with small limits, written to `dir`. */
export function writeTestPolicy(dir: string, edits: [string[], unknown][] = []): string {
  const doc = parseDocument(readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"));
  doc.setIn(["sandbox", "image"], sandboxImage("test"));
  doc.setIn(["sandbox", "memory"], "128MiB");
  doc.setIn(["sandbox", "pids"], 64);
  doc.setIn(["sandbox", "tmp"], "16MiB");
  doc.setIn(["sandbox", "cpu"], 1);
  for (const [at, value] of edits) doc.setIn(at, value);
  const path = join(dir, "policy.yaml");
  writeFileSync(path, doc.toString());
  return path;
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const docker = await requireDocker();
  const dir = mkdtempSync(join(tmpdir(), "agentd-cluster-"));
  const leaseTtl = String(opts.leaseTtlMs ?? 3000);
  const policyFile = writeTestPolicy(dir, opts.policy);
  const artifactDir = join(dir, "artifacts");
  const processes: AgentdProcess[] = [];
  const workers: AgentdProcess[] = [];
  const runs = new Set<string>();
  let redis: TestRedis | undefined;
  let stub: OpenAiStub | undefined;
  let client: GrpcRunClient | undefined;
  let log: RedisEventLog | undefined;
  let queue: RedisRunQueue | undefined;
  let stopped = false;

  const containersOf = async (runId: string): Promise<string[]> => {
    const [labelled, named] = await Promise.all([
      docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN}=${runId}`] } }),
      // The name filter matches substrings: keep exact names only.
      docker.listContainers({ all: true, filters: { name: [containerName("true", runId)] } }),
    ]);
    const exact = `/${containerName("true", runId)}`;
    return [
      ...new Set([
        ...labelled.map((c) => c.Id),
        ...named.filter((c) => c.Names.includes(exact)).map((c) => c.Id),
      ]),
    ];
  };
  /** Warm containers of the workers (a SIGKILLed worker cannot remove its own). */
  const warmContainers = async (): Promise<string[]> => {
    const owners = new Set(workers.map((w) => `${hostname()}:${w.pid}`));
    const list = await docker.listContainers({ all: true, filters: { label: [LABEL_POOL] } });
    return list.filter((c) => owners.has(c.Labels[LABEL_POOL] ?? "")).map((c) => c.Id);
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await Promise.allSettled(processes.map((p) => p.kill()));
    client?.close();
    const removeContainers = () =>
      Promise.allSettled([
        ...[...runs].map(async (runId) => {
          for (const id of await containersOf(runId))
            await docker.getContainer(id).remove({ force: true, v: true });
        }),
        warmContainers().then((ids) =>
          Promise.allSettled(
            ids.map((id) => docker.getContainer(id).remove({ force: true, v: true })),
          ),
        ),
      ]);
    await Promise.allSettled([log?.close(), queue?.close(), stub?.close(), removeContainers()]);
    // A create a killed worker had in flight may still land in the engine: look once more.
    await new Promise((r) => setTimeout(r, 300));
    await removeContainers();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    redis = await startRedis({ appendfsync: opts.appendfsync ?? "always" });
    stub = await startOpenAiStub(opts.script);
    const common = [
      "--event-log",
      redis.url,
      "--artifact-dir",
      artifactDir,
      "--policy",
      policyFile,
      "--lease-ttl-ms",
      leaseTtl,
    ];
    const workerFlags = [
      ...common,
      "--concurrency",
      String(opts.concurrency ?? 2),
      ...(opts.workerFlags ?? []),
    ];
    const workerEnv = { ...opts.env, OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL };
    const startWorker = async (extraFlags: string[] = []): Promise<AgentdProcess> => {
      const w = await startAgentd("worker", [...workerFlags, ...extraFlags], { env: workerEnv });
      processes.push(w);
      workers.push(w);
      return w;
    };
    const [server] = await Promise.all([
      startAgentd("server", [...common, "--insecure-no-auth", ...(opts.serverFlags ?? [])], {
        env: { ...opts.env },
      }).then((s) => {
        processes.push(s);
        return s;
      }),
      ...Array.from({ length: opts.workers ?? 2 }, () => startWorker()),
    ]);
    client = new GrpcRunClient(server.addr);
    const conn = redis.client();
    log = new RedisEventLog({ client: conn });
    queue = new RedisRunQueue({ client: conn, leaseTtlMs: Number(leaseTtl) });
    return {
      dir,
      redis,
      stub,
      server,
      workers,
      client,
      log,
      queue,
      docker,
      policyFile,
      artifactDir,
      startWorker,
      workerOf: (workerId) => {
        const pid = Number(workerId.slice(workerId.lastIndexOf(":") + 1));
        return workers.find((w) => w.pid === pid);
      },
      containersOf,
      track: (runId) => void runs.add(runId),
      diagnostics: (lines = 40) =>
        processes
          .map((p) => {
            const name = workers.includes(p) ? `worker ${p.pid}` : `server ${p.pid}`;
            return `--- ${name}\n${p.output().split("\n").slice(-lines).join("\n")}`;
          })
          .join("\n"),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
