#!/usr/bin/env node
/**
 * agentctl: the command-line client of agentd. Talks gRPC (HTTP/2) to a server or to
 * `agentd dev`; address and token from flags or AGENTD_ADDR / AGENTD_TOKEN.
 */
import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import { create, toJson } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { canonicalJson } from "../../internal/eventlog/canonical-json.ts";
import { verifyChain } from "../../internal/eventlog/hash-chain.ts";
import { type Event, EventSchema } from "../../internal/gen/agentd/v1/events_pb.js";
import { RunSchema, RunService, RunState } from "../../internal/gen/agentd/v1/run_service_pb.js";

const USAGE = `agentctl — the agentd command-line client

Usage: agentctl [--addr URL] [--token TOKEN] COMMAND [flags]

Commands:
  run --prompt TEXT [--session ID] [--priority 1-10] [--skill NAME]... [--no-wait] [--json]
                          start a run; follows its events unless --no-wait
  runs [--state STATE] [--session ID] [--limit N]
                          list your runs, newest first
  get RUN                 show a run
  events RUN [--from-seq N] [--follow] [--json]
                          print a run's events (after seq N); --follow waits for new ones
  verify RUN              check the run's hash chain; exit 1 naming the first bad seq
  cancel RUN [--reason TEXT]
                          cancel a run

Global flags (also environment variables):
  --addr URL     AGENTD_ADDR   server address (default http://127.0.0.1:7070)
  --token TOKEN  AGENTD_TOKEN  bearer token (not needed for agentd dev)

Exit codes: 0 ok (run completed), 1 failed, 2 cancelled / usage error, 3 waiting (--no-wait).`;

type RunClient = Client<typeof RunService>;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const globals = parseArgs({
    args: argv,
    options: {
      addr: { type: "string" },
      token: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
    strict: false,
  });
  const [cmd] = globals.positionals;
  if (cmd === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return globals.values.help === true ? 0 : 2;
  }
  const addr = String(globals.values.addr ?? process.env.AGENTD_ADDR ?? "http://127.0.0.1:7070");
  const token = (globals.values.token ?? process.env.AGENTD_TOKEN) as string | undefined;
  const transport = createGrpcTransport({
    baseUrl: /^https?:\/\//.test(addr) ? addr : `http://${addr}`,
    interceptors: token
      ? [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${token}`);
            return next(req);
          },
        ]
      : [],
  });
  const client = createClient(RunService, transport);
  const args = argv.slice(argv.indexOf(cmd) + 1);
  switch (cmd) {
    case "run":
      return runCmd(client, args);
    case "runs":
      return runsCmd(client, args);
    case "get":
      return getCmd(client, args);
    case "events":
      return eventsCmd(client, args);
    case "verify":
      return verifyCmd(client, args);
    case "cancel":
      return cancelCmd(client, args);
    case "help":
      process.stdout.write(`${USAGE}\n`);
      return 0;
    default:
      throw new UsageError(`unknown command ${JSON.stringify(cmd)}`);
  }
}

type Values = Record<string, string | boolean | string[] | undefined>;

function sub(
  args: string[],
  options: ParseArgsOptionsConfig,
  positionals = 0,
): { values: Values; positionals: string[] } {
  const parsed = parseArgs({
    args,
    options: {
      ...options,
      help: { type: "boolean", short: "h" },
      addr: { type: "string" },
      token: { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (parsed.values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 1 ? "give exactly one RUN id" : "unexpected arguments");
  }
  return { values: parsed.values as Values, positionals: parsed.positionals };
}

async function runCmd(client: RunClient, args: string[]): Promise<number> {
  const { values } = sub(args, {
    prompt: { type: "string" },
    session: { type: "string" },
    priority: { type: "string" },
    skill: { type: "string", multiple: true },
    "no-wait": { type: "boolean" },
    json: { type: "boolean" },
  });
  if (typeof values.prompt !== "string") throw new UsageError("run needs --prompt TEXT");
  const res = await client.createRun({
    prompt: values.prompt,
    sessionId: (values.session as string | undefined) ?? "",
    priority: values.priority === undefined ? 0 : Number(values.priority),
    skills: (values.skill as string[] | undefined) ?? [],
  });
  const run = res.run ?? create(RunSchema);
  if (values["no-wait"] === true) {
    process.stdout.write(
      values.json ? `${JSON.stringify(toJson(RunSchema, run))}\n` : `${run.runId}\n`,
    );
    return 3;
  }
  process.stderr.write(
    `run ${run.runId} queued; following its events (Ctrl-C stops following, not the run)\n`,
  );
  return follow(client, run.runId, 0n, values.json === true);
}

async function follow(
  client: RunClient,
  runId: string,
  after: bigint,
  json: boolean,
  historyOnly = false,
): Promise<number> {
  let last: Event | undefined;
  for await (const res of client.streamEvents({ runId, afterSeq: after, historyOnly })) {
    if (res.event === undefined) continue;
    last = res.event;
    process.stdout.write(
      json ? `${canonicalJson(toJson(EventSchema, res.event))}\n` : `${render(res.event)}\n`,
    );
  }
  switch (last?.type) {
    case "run.completed":
      return 0;
    case "run.failed":
      return 1;
    case "run.cancelled":
      return 2;
    default:
      return 0;
  }
}

function render(ev: Event): string {
  const p = ev.payload;
  const head = `${String(ev.seq).padStart(4)}  ${ev.type.padEnd(20)}`;
  switch (p.case) {
    case "runQueued":
      return `${head} prompt=${JSON.stringify(p.value.prompt.slice(0, 80))} priority=${p.value.priority}`;
    case "outputDelta":
      return `${head} ${JSON.stringify(p.value.text)}`;
    case "toolCall":
      return `${head} ${p.value.tool} ${p.value.inputJson.slice(0, 120)}`;
    case "runFailed":
      return `${head} ${p.value.error?.code}: ${p.value.error?.message}`;
    default:
      return head;
  }
}

async function runsCmd(client: RunClient, args: string[]): Promise<number> {
  const { values } = sub(args, {
    state: { type: "string" },
    session: { type: "string" },
    limit: { type: "string" },
  });
  const state =
    values.state === undefined
      ? RunState.UNSPECIFIED
      : RunState[String(values.state).toUpperCase() as keyof typeof RunState];
  if (state === undefined)
    throw new UsageError(
      `--state: one of ${Object.keys(RunState)
        .filter((k) => Number.isNaN(Number(k)))
        .join(", ")
        .toLowerCase()}`,
    );
  const res = await client.listRuns({
    state,
    sessionId: (values.session as string | undefined) ?? "",
    pageSize: Number(values.limit ?? 50),
  });
  for (const r of res.runs) {
    process.stdout.write(
      `${r.runId}  ${RunState[r.state].toLowerCase().padEnd(9)}  seq=${r.lastSeq}  ${r.prompt.slice(0, 60).replace(/\s+/g, " ")}\n`,
    );
  }
  return 0;
}

async function getCmd(client: RunClient, args: string[]): Promise<number> {
  const { positionals } = sub(args, {}, 1);
  const res = await client.getRun({ runId: positionals[0] as string });
  process.stdout.write(
    `${JSON.stringify(toJson(RunSchema, res.run ?? create(RunSchema)), null, 2)}\n`,
  );
  return 0;
}

async function eventsCmd(client: RunClient, args: string[]): Promise<number> {
  const { values, positionals } = sub(
    args,
    { "from-seq": { type: "string" }, follow: { type: "boolean" }, json: { type: "boolean" } },
    1,
  );
  const from = values["from-seq"] === undefined ? 0n : BigInt(String(values["from-seq"]));
  await follow(
    client,
    positionals[0] as string,
    from,
    values.json === true,
    values.follow !== true,
  );
  return 0;
}

async function verifyCmd(client: RunClient, args: string[]): Promise<number> {
  const { positionals } = sub(args, {}, 1);
  const runId = positionals[0] as string;
  const events: Record<string, unknown>[] = [];
  for await (const res of client.streamEvents({ runId, afterSeq: 0n, historyOnly: true })) {
    if (res.event) events.push(toJson(EventSchema, res.event) as Record<string, unknown>);
  }
  const v = verifyChain(events);
  if (v.ok) {
    process.stdout.write(`run ${runId}: hash chain OK (${v.count} events, head ${v.headHash})\n`);
    return 0;
  }
  process.stdout.write(`run ${runId}: hash chain BROKEN at seq ${v.seq}: ${v.reason}\n`);
  return 1;
}

async function cancelCmd(client: RunClient, args: string[]): Promise<number> {
  const { values, positionals } = sub(args, { reason: { type: "string" } }, 1);
  const res = await client.cancelRun({
    runId: positionals[0] as string,
    reason: (values.reason as string | undefined) ?? "",
  });
  process.stdout.write(
    `run ${res.run?.runId}: ${(RunState[res.run?.state ?? 0] ?? "unknown").toLowerCase()}\n`,
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (
      err instanceof UsageError ||
      (err as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION"
    ) {
      process.stderr.write(
        `agentctl: ${(err as Error).message}\nRun 'agentctl --help' for usage.\n`,
      );
      process.exit(2);
    }
    if (err instanceof ConnectError) {
      const hint =
        err.code === Code.Unavailable
          ? " — is agentd running? Set --addr or AGENTD_ADDR"
          : err.code === Code.Unauthenticated
            ? " — set --token or AGENTD_TOKEN"
            : "";
      process.stderr.write(`agentctl: ${Code[err.code]}: ${err.rawMessage}${hint}\n`);
      process.exit(1);
    }
    process.stderr.write(`agentctl: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
