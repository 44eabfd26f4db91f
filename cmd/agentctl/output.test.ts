/**
 * agentctl -o/--output end to end: the real bin/agentctl, spawned as a child process,
 * against real `bin/agentd dev` processes.
 *
 * - "queue": agentd dev with an auth file and no model (runs stay queued): every format on
 *   run --no-wait, runs (with paging), get, events, cancel, wait, whoami and config
 *   get-contexts; a hostile prompt (ESC, OSC, C1 CSI, a bidi override) comes back intact
 *   in json/yaml and escaped in jsonpath; the usage errors (exit 64, before any request).
 * - "model": agentd dev with a scripted model and the test sandbox image: wait --for
 *   approval -o jsonpath, approvals in every format, approve -o json, run -o jsonpath of a
 *   run that ends (the rendering on stderr), a model-written summary with escape sequences.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import {
  type AgentdProcess,
  startAgentd,
  writeAuthFile,
} from "../../internal/testing/agentd-process.ts";
import { sandboxImage } from "../../internal/testing/docker.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../../internal/testing/openai-stub.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const TOKEN = "acme-output-token";
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
/** What a prompt or a model may write to take over a terminal. */
const HOSTILE = "fix \x1b]0;owned\x07it\x1b[2J now\u009b31m\u202eevil";
const HOSTILE_ESCAPED = "fix \\x1b]0;owned\\x07it\\x1b[2J now\\x9b31m\\u202eevil";
// biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that none is there
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]/;

let dir: string;
let stub: OpenAiStub;
let queue: AgentdProcess;
let model: AgentdProcess;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function baseEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("AGENTD_") && k !== "FORCE_COLOR" && k !== "AGENTCTL_CONFIG") env[k] = v;
  }
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  env.GIT_CONFIG_NOSYSTEM = "1";
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

function ctl(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  const child: ChildProcess = spawn(AGENTCTL, args, {
    env: baseEnv(env),
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 120_000,
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

/** agentctl against the queue server with the acme token. */
function q(args: string[]): Promise<Result> {
  return ctl(args, { AGENTD_ADDR: queue.url, AGENTD_TOKEN: TOKEN });
}

/** agentctl against the model server (no auth). */
function m(args: string[]): Promise<Result> {
  return ctl(["--addr", model.url, ...args]);
}

function ok(r: Result, what: string): Result {
  assert.equal(r.code, 0, `${what}: exit ${r.code}\n${r.stderr}${r.stdout}`);
  return r;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentctl-output-"));
  // "just answer": a text reply at once. Otherwise a config file patch (needs approval),
  // then a summary with escape sequences in it (the model writes the summary).
  stub = await startOpenAiStub(({ body }) => {
    const msgs = JSON.stringify(body.messages);
    if (msgs.includes("just answer")) return { chunks: textReply(["answered"]) };
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    if (n === 0)
      return {
        chunks: toolCallsReply([
          {
            id: "c1",
            name: "repo_patch",
            arguments: JSON.stringify({
              path: "config.yaml",
              edits: [{ oldText: "a: 1", newText: "a: 2" }],
            }),
          },
        ]),
      };
    return { chunks: textReply([`Patched. ${HOSTILE}`]) };
  });
  const policy = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")));
  writeFileSync(join(dir, "policy.yaml"), policy);
  const auth = writeAuthFile(dir, [{ token: TOKEN, tenant: "acme", roles: ["admin"] }]);
  [queue, model] = await Promise.all([
    startAgentd("dev", ["--data-dir", join(dir, "queue-data"), "--auth-file", auth]),
    startAgentd(
      "dev",
      ["--data-dir", join(dir, "model-data"), "--policy", join(dir, "policy.yaml")],
      { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
    ),
  ]);
  const repo = join(dir, "repo");
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "config.yaml"), "a: 1\n");
  writeFileSync(join(repo, "greet.txt"), "hello\n");
});

after(async () => {
  await Promise.allSettled([queue?.stop("SIGKILL"), model?.stop("SIGKILL")]);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("agentctl -o against agentd dev without a model (runs stay queued)", () => {
  let hostile: string;
  let plain: string;

  it("run --no-wait prints the created run in each format", async () => {
    const repo = join(dir, "repo");
    const base = ["run", "--repo", repo, "--no-wait"];
    const name = ok(await q([...base, "--prompt", HOSTILE, "-o", "name"]), "run -o name");
    assert.match(name.stdout, /^run\/[0-9A-HJKMNP-TV-Z]{26}\n$/);
    hostile = name.stdout.trim().slice("run/".length);
    const jp = ok(
      await q([...base, "--prompt", "plain", "--label", "team=core", "-o", "jsonpath={.runId}"]),
      "run -o jsonpath",
    );
    assert.match(jp.stdout, ULID, "the id alone, no newline (as kubectl)");
    plain = jp.stdout;
    const yaml = ok(
      await q([...base, "--prompt", "yaml please", "--output", "yaml"]),
      "run -o yaml",
    );
    const doc = parseYaml(yaml.stdout);
    assert.match(doc.runId, ULID);
    assert.equal(doc.state, "RUN_STATE_QUEUED");
    assert.equal(doc.prompt, "yaml please");
    const cancel = ok(await q(["cancel", doc.runId, "-o", "jsonpath={.state}"]), "cancel -o");
    assert.equal(cancel.stdout, "RUN_STATE_CANCELLED");
    const wait = await q(["wait", doc.runId, "-o", "json"]);
    assert.equal(wait.code, 2, "wait -o keeps the outcome's exit code");
    assert.equal(JSON.parse(wait.stdout).state, "RUN_STATE_CANCELLED");
  });

  it("runs: json is {items}, yaml the same document, name run/ID lines, jsonpath templates", async () => {
    const [json, yaml, name, jp, legacy] = await Promise.all([
      q(["runs", "-o", "json"]),
      q(["runs", "-o", "yaml"]),
      q(["runs", "-o", "name", "--state", "queued"]),
      q([
        "runs",
        "--state",
        "queued",
        "-o",
        'jsonpath={range .items[*]}{.runId}{"\\t"}{.prompt}{"\\n"}{end}',
      ]),
      q(["runs", "--state", "queued", "--json"]),
    ]);
    for (const [r, what] of [
      [json, "json"],
      [yaml, "yaml"],
      [name, "name"],
      [jp, "jsonpath"],
      [legacy, "--json"],
    ] as const)
      ok(r, `runs ${what}`);
    const doc = JSON.parse(json.stdout);
    assert.equal(doc.items.length, 3);
    assert.deepEqual(parseYaml(yaml.stdout), doc, "yaml is the same document");
    const byId = new Map(doc.items.map((r: { runId: string }) => [r.runId, r]));
    assert.equal((byId.get(hostile) as { prompt: string }).prompt, HOSTILE, "json keeps the value");
    assert.equal((byId.get(plain) as { labels: { team: string } }).labels.team, "core");
    for (const r of [json, yaml, name, jp])
      assert.doesNotMatch(r.stdout, RAW_CONTROL, "no raw control character on stdout");
    assert.equal(name.stdout, `run/${plain}\nrun/${hostile}\n`, "newest first, queued only");
    assert.equal(jp.stdout, `${plain}\tplain\n${hostile}\t${HOSTILE_ESCAPED}\n`);
    assert.deepEqual(
      legacy.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).runId),
      [plain, hostile],
      "--json keeps its one-run-per-line form",
    );

    const first = ok(await q(["runs", "--limit", "1", "-o", "jsonpath={.nextPageToken}"]), "page");
    assert.notEqual(first.stdout, "", "nextPageToken when more remain");
    const next = ok(
      await q(["runs", "--limit", "5", "--page-token", first.stdout, "-o", "json"]),
      "next page",
    );
    const rest = JSON.parse(next.stdout);
    assert.equal(rest.items.length, 2);
    assert.equal(rest.nextPageToken, undefined, "no token on the last page");
  });

  it("get: each format; --json is -o json; a path that selects nothing prints nothing", async () => {
    const [json, legacy, yaml, name, state, prompt, nothing] = await Promise.all([
      q(["get", hostile, "-o", "json"]),
      q(["get", hostile, "--json"]),
      q(["get", hostile, "-o", "yaml"]),
      q(["get", hostile, "-o", "name"]),
      q(["get", hostile, "-o", "jsonpath={.state}"]),
      q(["get", hostile, "-o", "jsonpath={.prompt}"]),
      q(["get", hostile, "-o", "jsonpath={.summary}{.items[*].nope}"]),
    ]);
    const run = JSON.parse(ok(json, "get -o json").stdout);
    assert.equal(run.runId, hostile);
    assert.equal(run.prompt, HOSTILE);
    assert.equal(ok(legacy, "get --json").stdout, json.stdout);
    assert.deepEqual(parseYaml(ok(yaml, "get -o yaml").stdout), run);
    assert.equal(ok(name, "get -o name").stdout, `run/${hostile}\n`);
    assert.equal(ok(state, "get -o jsonpath").stdout, "RUN_STATE_QUEUED");
    assert.equal(ok(prompt, "get -o jsonpath prompt").stdout, HOSTILE_ESCAPED);
    assert.equal(ok(nothing, "selects nothing").stdout, "");
  });

  it("events, whoami and config get-contexts print resources too", async () => {
    const cfg = join(dir, "agentctl.yaml");
    writeFileSync(
      cfg,
      `current-context: q\ncontexts:\n  q: {addr: "${queue.url}"}\n  other: {addr: "http://127.0.0.1:9", ca-file: ca.pem}\n`,
    );
    chmodSync(cfg, 0o600);
    const [events, evName, who, whoName, contexts, ctxName] = await Promise.all([
      q(["events", plain, "-o", "jsonpath={.items[*].type}"]),
      q(["events", plain, "-o", "name"]),
      q(["whoami", "-o", "json"]),
      q(["whoami", "-o", "name"]),
      ctl(["config", "get-contexts", "-o", "json"], { AGENTCTL_CONFIG: cfg }),
      ctl(["config", "get-contexts", "-o", "name"], { AGENTCTL_CONFIG: cfg }),
    ]);
    assert.equal(ok(events, "events -o jsonpath").stdout, "run.queued");
    assert.equal(ok(evName, "events -o name").stdout, `event/${plain}/1\n`);
    const me = JSON.parse(ok(who, "whoami -o json").stdout);
    assert.equal(me.tenantId, "acme");
    assert.deepEqual(me.roles, ["admin"]);
    assert.equal(ok(whoName, "whoami -o name").stdout, `principal/${me.principal}\n`);
    assert.deepEqual(JSON.parse(ok(contexts, "get-contexts -o json").stdout), {
      items: [
        { name: "q", addr: queue.url, current: true },
        { name: "other", addr: "http://127.0.0.1:9", "ca-file": "ca.pem", current: false },
      ],
    });
    assert.equal(ok(ctxName, "get-contexts -o name").stdout, "context/q\ncontext/other\n");
  });

  it("an unknown format or a malformed template is a usage error (64) before any request", async () => {
    // The address is unreachable: an exit 4 would mean a request was tried first.
    const dead = { AGENTD_ADDR: "127.0.0.1:9" };
    const [unknown, yml, malformed, noTemplate, both, badRange] = await Promise.all([
      ctl(["get", "RUN", "-o", "jsn"], dead),
      ctl(["runs", "-o", "yml"], dead),
      ctl(["runs", "-o", "jsonpath={.items[*].runId"], dead),
      ctl(["approvals", "-o", "jsonpath"], dead),
      ctl(["runs", "--json", "-o", "json"], dead),
      ctl(["get", "RUN", "-o", "jsonpath={range .items[*]}{.runId}"], dead),
    ]);
    for (const r of [unknown, yml, malformed, noTemplate, both, badRange])
      assert.equal(r.code, 64, r.stderr);
    assert.match(
      unknown.stderr,
      /unknown --output format "jsn": use json, yaml, name or jsonpath=TEMPLATE \(did you mean json\?\)/,
    );
    assert.match(unknown.stderr, /Run 'agentctl get --help' for usage/);
    assert.match(yml.stderr, /did you mean yaml\?/);
    assert.match(
      malformed.stderr,
      /--output jsonpath: unclosed "\{": an action ends with "\}" at character 1 of the template\n {2}\{\.items\[\*\]\.runId\n {2}\^/,
    );
    assert.match(
      noTemplate.stderr,
      /jsonpath needs a template after "=", e\.g\. -o jsonpath='\{\.runId\}'/,
    );
    assert.match(both.stderr, /give --json or --output, not both/);
    assert.match(badRange.stderr, /"\{range …\}" has no "\{end\}" at character 1/);
    const flag = await ctl(["replay", "RUN", "-o", "json"], dead);
    assert.equal(flag.code, 64, "commands that print no resource have no -o");
    assert.match(flag.stderr, /Unknown option '-o'/);
  });

  it("-o may come before the command, as with kubectl", async () => {
    const r = ok(await q(["-o", "name", "get", plain]), "-o before the command");
    assert.equal(r.stdout, `run/${plain}\n`);
    const eq = ok(await q(["get", plain, "-o=jsonpath={.runId}"]), "-o=…");
    assert.equal(eq.stdout, plain);
  });
});

describe("agentctl -o against agentd dev with a model", () => {
  let runId: string;
  let approvalId: string;

  it("wait --for approval -o jsonpath gives the approval id (exit 3)", async () => {
    const created = ok(
      await m(["run", "--repo", join(dir, "repo"), "--prompt", "patch it", "--no-wait"]),
      "run --no-wait",
    );
    runId = created.stdout.trim();
    const r = await m(["wait", runId, "--for", "approval", "-o", "jsonpath={.pendingApprovalId}"]);
    assert.equal(r.code, 3, r.stderr + r.stdout);
    assert.match(r.stdout, /^apr_\S+$/);
    approvalId = r.stdout;
  });

  it("approvals in every format; approve -o json prints the resolved approval", async () => {
    const [json, yaml, name, jp] = await Promise.all([
      m(["approvals", "--run", runId, "-o", "json"]),
      m(["approvals", "--run", runId, "-o", "yaml"]),
      m(["approvals", "-o", "name"]),
      m([
        "approvals",
        "-o",
        'jsonpath={range .items[*]}{.approvalId} {.tool} {.runId}{"\\n"}{end}',
      ]),
    ]);
    const doc = JSON.parse(ok(json, "approvals -o json").stdout);
    assert.equal(doc.items.length, 1);
    assert.equal(doc.items[0].approvalId, approvalId);
    assert.equal(doc.items[0].tool, "repo.patch");
    assert.equal(doc.items[0].state, "APPROVAL_STATE_PENDING");
    assert.deepEqual(doc.items[0].preview.files, ["config.yaml"]);
    assert.deepEqual(parseYaml(ok(yaml, "approvals -o yaml").stdout), doc);
    assert.equal(ok(name, "approvals -o name").stdout, `approval/${approvalId}\n`);
    assert.equal(ok(jp, "approvals -o jsonpath").stdout, `${approvalId} repo.patch ${runId}\n`);

    const approved = ok(
      await m(["approve", approvalId, "--reason", "fine", "-o", "json"]),
      "approve",
    );
    const a = JSON.parse(approved.stdout);
    assert.equal(a.approvalId, approvalId);
    assert.equal(a.state, "APPROVAL_STATE_APPROVED");
    assert.equal(a.reason, "fine");
  });

  it("wait -o prints the ended run; the model's summary is escaped in jsonpath, intact in json", async () => {
    const r = ok(await m(["wait", runId, "-o", 'jsonpath={.state}{"\\n"}{.summary}']), "wait -o");
    assert.equal(r.stdout, `RUN_STATE_COMPLETED\nPatched. ${HOSTILE_ESCAPED}`);
    const json = ok(await m(["get", runId, "-o", "json"]), "get -o json");
    assert.equal(JSON.parse(json.stdout).summary, `Patched. ${HOSTILE}`);
    assert.doesNotMatch(json.stdout, RAW_CONTROL);
  });

  it("run -o jsonpath waits for the end: stdout is the template, the rendering goes to stderr", async () => {
    const r = await m([
      "run",
      "--repo",
      join(dir, "repo"),
      "--prompt",
      "just answer",
      "--follow",
      "-o",
      "jsonpath={.state} {.summary}",
    ]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(r.stdout, "RUN_STATE_COMPLETED answered");
    assert.match(r.stderr, /answered/);
    assert.match(r.stderr, /✔ completed/);
  });
});
