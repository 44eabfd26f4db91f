/**
 * agentctl end to end: the real bin/agentctl, spawned as a child process, against real
 * `bin/agentd dev` processes.
 *
 * - "queue": agentd dev with an auth file and no model (its worker is off, runs stay
 *   queued): run --no-wait, what the packer uploads (.gitignore honoured, links out of the
 *   tree left out), get with queue positions, runs paging, events as NDJSON, cancel,
 *   replay, wait and events --follow of a cancelled run (exit 2), the reused-run note of
 *   an idempotent retry, approvals, and the error messages (unreachable, tokens,
 *   tenants, invalid fields, sizes).
 * - "model": agentd dev with a scripted OpenAI-compatible model (internal/testing/openai-stub)
 *   and the test sandbox image: run --follow through an approval given with agentctl
 *   approve, replay printing exactly what the follow printed, verify, events --json,
 *   artifact get applying with git apply; run --follow --no-wait stopping at the approval
 *   (exit 3) and deny; a failing run (exit 1 from run, replay, events --follow, wait);
 *   wait --for approval (exit 3) and wait for the end (exit 0); then one byte of a stored
 *   event changed on disk makes verify fail naming that seq.
 * - --help on every command.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import * as tar from "tar-stream";
import { canonicalJson } from "../../internal/eventlog/canonical-json.ts";
import { verifyChain } from "../../internal/eventlog/hash-chain.ts";
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
import { COMMANDS } from "./help.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));
const TOKEN = "acme-token";
const OTHER = "other-tenant-token";

let dir: string;
let stub: OpenAiStub;
let queue: AgentdProcess;
let model: AgentdProcess;
let modelFlags: string[];
let modelEnv: Record<string, string>;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function baseEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("AGENTD_") && k !== "FORCE_COLOR") env[k] = v;
  }
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  env.GIT_CONFIG_NOSYSTEM = "1";
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

function spawnCtl(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string } = {},
): ChildProcess {
  return spawn(AGENTCTL, args, {
    env: baseEnv(opts.env ?? {}),
    cwd: opts.cwd ?? dir,
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 120_000, // a safety net for a hung client, never hit by a slow one
  });
}

function collect(child: ChildProcess): Promise<Result> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

function ctl(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string } = {},
): Promise<Result> {
  return collect(spawnCtl(args, opts));
}

/** agentctl against the queue server, with the acme token from the environment. */
function q(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  return ctl(args, { env: { AGENTD_ADDR: queue.url, AGENTD_TOKEN: TOKEN, ...env } });
}

/** agentctl against the model server (no auth), with the address as a flag. */
function m(args: string[]): Promise<Result> {
  return ctl(["--addr", model.addr, ...args]);
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
    cwd,
    encoding: "utf8",
    env: baseEnv({}),
  });
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [p, data] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), data);
  }
}

async function tarNames(file: string): Promise<string[]> {
  const names: string[] = [];
  const ex = tar.extract();
  ex.on("entry", (h, stream, next) => {
    names.push(h.name.replace(/\/$/, ""));
    stream.resume();
    stream.on("end", next);
  });
  const done = new Promise<void>((r) => ex.on("finish", () => r()));
  Readable.from([readFileSync(file)]).pipe(ex);
  await done;
  return names.filter((n) => n !== "" && n !== ".");
}

function runIdFrom(stderr: string): string {
  const id = /run ([0-9A-HJKMNP-TV-Z]{26}) created/.exec(stderr)?.[1];
  assert.ok(id, `no run id in:\n${stderr}`);
  return id;
}

/** Resolves with the first stderr line matching `re` (its match). */
function waitForLine(child: ChildProcess, re: RegExp, what: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${what} in time`)), 30_000);
    const rl = createInterface({ input: child.stderr as Readable });
    rl.on("line", (line) => {
      const hit = re.exec(line);
      if (hit) {
        clearTimeout(t);
        resolve(hit);
      }
    });
  });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentctl-e2e-"));
  // The model: read the file, patch config.yaml (a config file: needs approval), fix the
  // greeting with a command, then say it is done. "please fail": a refused API key.
  stub = await startOpenAiStub(({ body }) => {
    const msgs = JSON.stringify(body.messages);
    if (msgs.includes("please fail"))
      return { status: 401, body: { error: { message: "bad key" } } };
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    const call = (id: string, name: string, args: unknown) => ({
      chunks: toolCallsReply([{ id, name, arguments: JSON.stringify(args) }]),
    });
    if (n === 0) return call("c1", "repo_read", { path: "greet.txt" });
    if (n === 1)
      return call("c2", "repo_patch", {
        path: "config.yaml",
        edits: [{ oldText: "a: 1", newText: "a: 2" }],
      });
    if (n === 2)
      return call("c3", "process_run", {
        command: "sed -i s/helo/hello/ greet.txt && cat greet.txt",
      });
    return { chunks: textReply(["Reading done. ", "Fixed the greeting."]) };
  });
  const policy = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")));
  writeFileSync(join(dir, "policy.yaml"), policy);
  const auth = writeAuthFile(dir, [
    { token: TOKEN, tenant: "acme", roles: ["admin"] },
    { token: OTHER, tenant: "other", roles: ["read"] },
  ]);
  modelFlags = ["--data-dir", join(dir, "model-data"), "--policy", join(dir, "policy.yaml")];
  modelEnv = { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL };
  [queue, model] = await Promise.all([
    startAgentd("dev", ["--data-dir", join(dir, "queue-data"), "--auth-file", auth]),
    startAgentd("dev", modelFlags, { env: modelEnv }),
  ]);

  // The repository the model works on: a git work tree with an ignored file.
  const repo = join(dir, "repo");
  writeTree(repo, {
    "greet.txt": "helo\n",
    "config.yaml": "a: 1\n",
    ".gitignore": "ignored.txt\n",
    "ignored.txt": "not uploaded\n",
  });
  git(repo, "init", "-q");
  git(repo, "add", ".");
  git(repo, "commit", "-qm", "init");
});

after(async () => {
  await Promise.allSettled([queue?.stop("SIGKILL"), model?.stop("SIGKILL")]);
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("agentctl against agentd dev with a model", () => {
  let followed: { runId: string; stdout: string };

  it("run --follow renders the run, waits at the approval (approved with agentctl approve), exits 0", async () => {
    const child = spawnCtl([
      "--addr",
      model.url,
      "run",
      "--repo",
      join(dir, "repo"),
      "--prompt",
      "fix the greeting",
      "--follow",
    ]);
    const done = collect(child);
    const hint = await waitForLine(child, /agentctl approve (apr_\S+)/, "approval hint");
    const ok = await m(["approve", hint[1] as string, "--reason", "fine"]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^approved apr_/);
    const res = await done;
    assert.equal(res.code, 0, res.stderr + res.stdout);
    const runId = runIdFrom(res.stderr);
    assert.match(res.stderr, /packed 3 files .*git ls-files/);
    for (const want of [
      `● run ${runId} queued`,
      "→ repo.read greet.txt",
      "→ repo.patch config.yaml (1 edit)",
      "approval needed",
      "│ +a: 2",
      "⏸ paused: waiting for approval",
      "✔ approved",
      "by local: fine",
      "→ process.run $ sed -i s/helo/hello/ greet.txt && cat greet.txt",
      "  │ hello",
      "✓ process.run exit 0",
      "Reading done. Fixed the greeting.",
      "◆ artifact patch",
      "✔ completed",
    ]) {
      assert.ok(res.stdout.includes(want), `missing ${JSON.stringify(want)} in:\n${res.stdout}`);
    }
    assert.ok(!res.stdout.includes("\x1b"), "no escape codes off a terminal");
    followed = { runId, stdout: res.stdout };
  });

  it("replay renders exactly what the follow printed; verify checks the chain", async () => {
    const [replay, verify, events, from] = await Promise.all([
      m(["replay", followed.runId]),
      m(["verify", followed.runId]),
      m(["events", followed.runId, "--json"]),
      m(["events", followed.runId, "--from-seq", "3"]),
    ]);
    assert.equal(replay.code, 0, replay.stderr);
    assert.equal(replay.stdout, followed.stdout);
    assert.equal(verify.code, 0, verify.stderr);
    assert.match(verify.stdout, /hash chain OK \(\d+ events, head [0-9a-f]{64}\)/);
    assert.equal(events.code, 0, events.stderr);
    const lines = events.stdout.trimEnd().split("\n");
    for (const l of lines) assert.equal(canonicalJson(JSON.parse(l)), l, "canonical JSON");
    assert.equal(verifyChain(lines).ok, true);
    assert.equal(JSON.parse(lines.at(-1) as string).type, "run.completed");
    assert.match(from.stdout, /^ {4}3 /, "--from-seq is inclusive");
    // The head verify prints is one verify --head accepts, and the log holds it.
    const head = /--head (\d+:[0-9a-f]{64})/.exec(verify.stdout)?.[1];
    assert.ok(head !== undefined, verify.stdout);
    const [held, bad] = await Promise.all([
      m(["verify", followed.runId, "--head", head]),
      m([
        "verify",
        followed.runId,
        "--head",
        `${Number(head.split(":")[0]) + 1}:${"0".repeat(64)}`,
      ]),
    ]);
    assert.equal(held.code, 0, held.stderr);
    assert.match(held.stdout, /it holds the head you saw/);
    assert.equal(bad.code, 1, bad.stderr);
    assert.match(bad.stdout, /the stored log lost events after seq \d+/);
  });

  it("artifact get writes the patch, which applies with git apply", async () => {
    const out = join(dir, "fix.patch");
    const [file, piped, ws] = await Promise.all([
      m(["artifact", "get", followed.runId, "--out", out]),
      m(["artifact", "get", followed.runId]),
      m(["artifact", "get", followed.runId, "--name", "workspace", "--out", join(dir, "ws.tar")]),
    ]);
    assert.equal(file.code, 0, file.stderr);
    assert.match(file.stderr, /wrote patch \(.*sha256 [0-9a-f]{64}\) to /);
    assert.equal(piped.stdout, readFileSync(out, "utf8"));
    const clone = join(dir, "clone");
    execFileSync("git", ["clone", "-q", join(dir, "repo"), clone], { env: baseEnv({}) });
    git(clone, "apply", "--check", out);
    git(clone, "apply", out);
    assert.equal(readFileSync(join(clone, "greet.txt"), "utf8"), "hello\n");
    assert.equal(readFileSync(join(clone, "config.yaml"), "utf8"), "a: 2\n");
    assert.equal(ws.code, 0, ws.stderr);
    assert.deepEqual((await tarNames(join(dir, "ws.tar"))).sort(), [
      ".gitignore",
      "config.yaml",
      "greet.txt",
    ]);
  });

  it("run --follow --no-wait --json stops at the approval with exit 3; deny lets the run go on", async () => {
    const res = await m([
      "run",
      "--repo",
      join(dir, "repo"),
      "--prompt",
      "fix the greeting, CI style",
      "--follow",
      "--no-wait",
      "--json",
    ]);
    assert.equal(res.code, 3, res.stderr);
    const events = res.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.equal(events.at(-1).type, "run.paused");
    const approvalId = events.at(-1).runPaused.approvalId as string;
    assert.ok(res.stderr.includes(`agentctl approve ${approvalId}`), res.stderr);
    assert.ok(res.stderr.includes(`agentctl deny ${approvalId}`));
    const runId = events[0].runId as string;

    const listed = await m(["approvals", "--run", runId]);
    assert.ok(listed.stdout.includes(approvalId));
    assert.ok(listed.stdout.includes("+a: 2"), listed.stdout);

    const deny = await m(["deny", approvalId, "--reason", "not this file"]);
    assert.equal(deny.code, 0, deny.stderr);
    const rest = await m(["events", runId, "--from-seq", String(events.length + 1), "--follow"]);
    assert.equal(rest.code, 0, rest.stderr);
    assert.match(rest.stdout, /approval\.resolved +apr_\S+ denied by local: "not this file"/);
    assert.match(rest.stdout, /run\.completed/);
  });

  it("a failing run exits 1, in run, replay, events --follow and wait", async () => {
    const res = await m(["run", "--repo", join(dir, "repo"), "--prompt", "please fail"]);
    assert.equal(res.code, 1, res.stderr + res.stdout);
    assert.match(res.stdout, /✘ failed.*EMODEL_AUTH/);
    const runId = runIdFrom(res.stderr);
    const [replay, events, wait] = await Promise.all([
      m(["replay", runId]),
      m(["events", runId, "--follow"]),
      m(["wait", runId]),
    ]);
    assert.equal(replay.code, 1);
    assert.equal(replay.stdout.split("\n").at(-2), res.stdout.split("\n").at(-2));
    assert.equal(events.code, 1, events.stderr + events.stdout);
    assert.match(events.stdout, /run\.failed/);
    assert.equal(wait.code, 1, wait.stderr);
    assert.equal(wait.stdout, "failed\n");
    assert.match(wait.stderr, /EMODEL_AUTH/);
  });

  it("wait: --for approval returns 3 once the run waits for a person; wait for the end returns 0 after the approval", async () => {
    const created = await m([
      "run",
      "--repo",
      join(dir, "repo"),
      "--prompt",
      "fix the greeting, waited on",
      "--no-wait",
    ]);
    assert.equal(created.code, 0, created.stderr);
    const runId = created.stdout.trim();
    const atApproval = await m(["wait", runId, "--for", "approval"]);
    assert.equal(atApproval.code, 3, atApproval.stderr + atApproval.stdout);
    assert.equal(atApproval.stdout, "waiting\n");
    const approvalId = /agentctl approve (apr_\S+)/.exec(atApproval.stderr)?.[1];
    assert.ok(approvalId, atApproval.stderr);
    const again = await m(["wait", runId, "--for", "approval"]);
    assert.equal(again.code, 3, "a run already waiting answers at once");

    const end = spawnCtl(["--addr", model.addr, "wait", runId]);
    const ended = collect(end);
    const ok = await m(["approve", approvalId, "--reason", "waited"]);
    assert.equal(ok.code, 0, ok.stderr);
    const res = await ended;
    assert.equal(res.code, 0, res.stderr + res.stdout);
    assert.equal(res.stdout, "completed\n");
    const [done, events] = await Promise.all([
      m(["wait", runId, "--for", "approval"]),
      m(["events", runId, "--follow"]),
    ]);
    assert.equal(done.code, 0, "--for approval on an ended run gives its outcome");
    assert.equal(done.stdout, "completed\n");
    assert.equal(events.code, 0, events.stderr);
  });

  it("verify fails naming the seq of a stored event changed on disk", async () => {
    const exit = await model.stop("SIGTERM");
    assert.equal(exit.code, 0, model.output());
    const file = join(dir, "model-data", "runs", `${followed.runId}.ndjson`);
    const lines = readFileSync(file, "utf8").split("\n");
    const k = lines.findIndex((l) => l.includes('"type":"output.message"'));
    assert.ok(k > 0);
    const at = (lines[k] as string).indexOf("Reading done");
    lines[k] = `${(lines[k] as string).slice(0, at)}X${(lines[k] as string).slice(at + 1)}`;
    writeFileSync(file, lines.join("\n"));
    model = await startAgentd("dev", modelFlags, { env: modelEnv });
    const res = await m(["verify", followed.runId]);
    assert.equal(res.code, 1, res.stdout + res.stderr);
    assert.match(res.stdout, new RegExp(`BROKEN at seq ${k + 1}: hash does not match`));
  });
});

describe("agentctl against agentd dev without a model (runs stay queued)", () => {
  let runId: string;
  let sessionId: string;
  let second: string;

  it("run --no-wait uploads the directory as git sees it and prints the run id", async () => {
    const ws = join(dir, "ws");
    writeTree(ws, {
      "src/main.ts": "export {}\n",
      "untracked.md": "new\n",
      ".gitignore": "*.log\nbuild/\n",
      "debug.log": "noise\n",
      "build/out.js": "generated\n",
      "docs/.gitignore": "draft.md\n",
      "docs/draft.md": "wip\n",
      "docs/final.md": "done\n",
    });
    writeTree(join(dir, "outside"), { "secret.txt": "s3cret\n" });
    git(ws, "init", "-q");
    git(ws, "add", "src", ".gitignore", "docs");
    git(ws, "commit", "-qm", "init");
    symlinkSync("../outside/secret.txt", join(ws, "leak"));
    symlinkSync("src/main.ts", join(ws, "main-link"));
    const res = await ctl(["run", "--prompt", "look around", "--no-wait", "--label", "team=core"], {
      cwd: ws,
      env: { AGENTD_ADDR: queue.addr, AGENTD_TOKEN: TOKEN },
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /^[0-9A-HJKMNP-TV-Z]{26}\n$/);
    assert.match(
      res.stderr,
      /left out leak: symlink to \.\.\/outside\/secret\.txt, outside the tree/,
    );
    runId = res.stdout.trim();

    const art = await q([
      "artifact",
      "get",
      runId,
      "--name",
      "workspace",
      "--out",
      join(dir, "q.tar"),
    ]);
    assert.equal(art.code, 0, art.stderr);
    assert.deepEqual((await tarNames(join(dir, "q.tar"))).sort(), [
      ".gitignore",
      "docs",
      "docs/.gitignore",
      "docs/final.md",
      "main-link",
      "src",
      "src/main.ts",
      "untracked.md",
    ]);
  });

  it("get shows the queued run and its place in its session's line", async () => {
    const first = await q(["get", runId, "--json"]);
    assert.equal(first.code, 0, first.stderr);
    const run = JSON.parse(first.stdout);
    assert.equal(run.state, "RUN_STATE_QUEUED");
    assert.equal(run.labels.team, "core");
    assert.equal(run.labels.repo, "ws");
    sessionId = run.sessionId;
    const res = await q([
      "run",
      "--prompt",
      "and then this",
      "--repo",
      join(dir, "outside"),
      "--no-wait",
      "--session",
      sessionId,
      "--priority",
      "2",
    ]);
    assert.equal(res.code, 0, res.stderr);
    second = res.stdout.trim();
    const shown = await q(["get", second]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /state +queued/);
    assert.match(
      shown.stdout,
      /position +1st in the queue, 2nd in its session \(waits for 1 earlier run of the session\)/,
    );
    assert.match(shown.stdout, /priority +2/);
    assert.match(shown.stdout, /held by +session: an earlier run of its session has not ended/);
  });

  it("runs lists and pages; events prints canonical NDJSON", async () => {
    const one = await q(["runs", "--state", "queued", "--limit", "1"]);
    assert.equal(one.code, 0, one.stderr);
    assert.ok(one.stdout.includes(second) && !one.stdout.includes(runId), "newest first");
    assert.match(one.stdout, /\(held by session\) and then this/, "the list marks a held run");
    const token = /--page-token (\S+)/.exec(one.stderr)?.[1];
    assert.ok(token, one.stderr);
    const next = await q(["runs", "--state", "queued", "--limit", "1", "--page-token", token]);
    assert.ok(next.stdout.includes(runId), next.stdout);
    const json = await q(["runs", "--session", sessionId, "--json"]);
    assert.equal(json.stdout.trim().split("\n").length, 2);
    const byLabel = await q(["runs", "-l", "team=core,repo", "--json"]);
    assert.equal(byLabel.code, 0, byLabel.stderr);
    assert.deepEqual(
      byLabel.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).runId),
      [runId],
    );
    const badSelector = await q(["runs", "--selector", "team in (core"]);
    assert.notEqual(badSelector.code, 0);
    assert.match(badSelector.stderr, /label_selector: unbalanced parentheses/);

    const ev = await q(["events", runId, "--json"]);
    assert.equal(ev.code, 0, ev.stderr);
    const line = ev.stdout.trimEnd();
    assert.equal(canonicalJson(JSON.parse(line)), line);
    assert.equal(JSON.parse(line).type, "run.queued");
    const none = await q(["approvals"]);
    assert.equal(none.code, 0);
    assert.match(none.stderr, /no pending approvals/);
  });

  it("run streams a workspace over 4 MiB with UploadWorkspace and names it by digest", async () => {
    const big = join(dir, "big-upload");
    mkdirSync(big, { recursive: true });
    writeFileSync(join(big, "blob.bin"), randomBytes(6 * 1024 * 1024));
    const r = await q(["run", "--prompt", "large", "--repo", big, "--no-wait", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /uploaded 6\.\d MiB in [\d.]+ s \(workspace [0-9a-f]{12}\)/);
    const run = JSON.parse(r.stdout);
    assert.match(run.workspaceDigest, /^[0-9a-f]{64}$/);
    const art = await q([
      "artifact",
      "get",
      run.runId,
      "--name",
      "workspace",
      "--out",
      join(dir, "big.tar"),
    ]);
    assert.equal(art.code, 0, art.stderr);
    assert.deepEqual(await tarNames(join(dir, "big.tar")), ["blob.bin"]);
  });

  it("run --idempotency-key: a retry returns the same run; another request is refused", async () => {
    const args = ["run", "--prompt", "once only", "--repo", join(dir, "outside"), "--no-wait"];
    const key = ["--idempotency-key", "ci-42-attempt"];
    const a = await q([...args, ...key, "--json"]);
    const b = await q([...args, ...key, "--json"]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const idOf = (out: string) => /"runId":"([0-9A-Z]{26})"/.exec(out)?.[1];
    assert.ok(idOf(a.stdout), a.stdout);
    assert.equal(idOf(b.stdout), idOf(a.stdout));
    assert.doesNotMatch(a.stderr, /reused run/);
    assert.ok(b.stderr.includes(`reused run ${idOf(a.stdout)}`), b.stderr);
    assert.match(b.stderr, /--idempotency-key ci-42-attempt already made it/);
    const other = await q([
      "run",
      "--prompt",
      "something else",
      "--repo",
      join(dir, "outside"),
      "--no-wait",
      ...key,
    ]);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /idempotency_key: already used by run/);
  });

  it("cancel: of a queued run at once; a waiting run exits 2; replay, wait and events --follow of a cancelled run exit 2", async () => {
    const waiting = spawnCtl(["run", "--prompt", "wait for me", "--repo", join(dir, "ws")], {
      env: { AGENTD_ADDR: queue.url, AGENTD_TOKEN: TOKEN },
    });
    const done = collect(waiting);
    const created = await waitForLine(waiting, /run (\S+) created/, "run created");
    const c = await q(["cancel", created[1] as string, "--reason", "changed my mind"]);
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stdout, /cancelled/);
    const res = await done;
    assert.equal(res.code, 2, res.stderr + res.stdout);
    assert.match(res.stdout, /✘ cancelled .*: changed my mind/);
    const [replay, wait, events] = await Promise.all([
      q(["replay", created[1] as string]),
      q(["wait", created[1] as string]),
      q(["events", created[1] as string, "--follow"]),
    ]);
    assert.equal(replay.code, 2);
    assert.equal(wait.code, 2, wait.stderr);
    assert.equal(wait.stdout, "cancelled\n");
    assert.equal(events.code, 2, events.stderr);
    const again = await q(["cancel", created[1] as string]);
    assert.equal(again.code, 0, "cancelling a cancelled run is fine");
  });

  it("errors say what to do", async () => {
    writeTree(join(dir, "big"), { "small.txt": "s" });
    writeFileSync(join(dir, "big", "blob.bin"), randomBytes(64 * 1024));
    const [
      unreachable,
      noToken,
      badToken,
      otherTenant,
      denied,
      badSession,
      badPriority,
      badImage,
      badApproval,
      tooBig,
      missingPrompt,
    ] = await Promise.all([
      ctl(["runs"], { env: { AGENTD_ADDR: "127.0.0.1:9" } }),
      q(["runs"], { AGENTD_TOKEN: undefined }),
      q(["runs", "--token", "wrong"]),
      q(["get", runId], { AGENTD_TOKEN: OTHER }),
      q(["cancel", runId], { AGENTD_TOKEN: OTHER }),
      q([
        "run",
        "--prompt",
        "x",
        "--no-wait",
        "--session",
        "bad id!",
        "--repo",
        join(dir, "outside"),
      ]),
      q(["run", "--prompt", "x", "--priority", "11"]),
      q([
        "run",
        "--prompt",
        "x",
        "--no-wait",
        "--image",
        "registry.example.com/team/app:1",
        "--repo",
        join(dir, "outside"),
      ]),
      q(["approve", "apr_nonsense"]),
      q(["run", "--prompt", "x", "--repo", join(dir, "big"), "--max-workspace-bytes", "16384"]),
      q(["run"]),
    ]);
    assert.equal(unreachable.code, 4);
    assert.match(
      unreachable.stderr,
      /cannot reach agentd at http:\/\/127\.0\.0\.1:9 \(from AGENTD_ADDR\).*\n.*--addr.*AGENTD_ADDR/,
    );
    assert.equal(noToken.code, 4);
    assert.match(noToken.stderr, /wants a token .*set AGENTD_TOKEN or pass --token/);
    assert.equal(badToken.code, 4);
    assert.match(badToken.stderr, /refused the token from --token/);
    assert.equal(otherTenant.code, 4);
    assert.match(otherTenant.stderr, new RegExp(`run ${runId} not found for your token's tenant`));
    assert.equal(denied.code, 4);
    assert.match(denied.stderr, /permission denied: .*lacks the role/);
    assert.equal(badSession.code, 4);
    assert.match(badSession.stderr, /invalid --session: .*session_id/);
    assert.equal(badPriority.code, 64);
    assert.match(badPriority.stderr, /--priority must be a whole number from 1 to 10/);
    // The server's policy allows no images of a run's own (sandbox.images is empty).
    assert.equal(badImage.code, 4);
    assert.match(
      badImage.stderr,
      /invalid --image: .*registry\.example\.com\/team\/app:1 is refused/,
    );
    assert.equal(badApproval.code, 4);
    assert.match(badApproval.stderr, /invalid approval ID: .*\(field approval_id\)/);
    assert.equal(tooBig.code, 4);
    assert.match(
      tooBig.stderr,
      /at most 16\.0 KiB can be uploaded.*Largest: blob\.bin \(64\.0 KiB\)/,
    );
    assert.equal(missingPrompt.code, 64);
    assert.match(missingPrompt.stderr, /run needs --prompt TEXT/);
  });
});

describe("agentctl --help", () => {
  it("every command has --help, the same as agentctl help COMMAND", async () => {
    const names = COMMANDS.map((c) => c.name).filter((n) => n !== "help");
    const results = await Promise.all(
      names.flatMap((n) => [ctl([...n.split(" "), "--help"]), ctl(["help", ...n.split(" ")])]),
    );
    names.forEach((n, i) => {
      const viaFlag = results[2 * i] as Result;
      const viaHelp = results[2 * i + 1] as Result;
      assert.equal(viaFlag.code, 0, `${n} --help: ${viaFlag.stderr}`);
      assert.ok(viaFlag.stdout.startsWith(`Usage: agentctl ${n}`), viaFlag.stdout);
      assert.match(viaFlag.stdout, /--addr URL/);
      assert.equal(viaHelp.stdout, viaFlag.stdout);
    });
    const [top, bare, unknown, badFlag, typo, flagTypo, badFor] = await Promise.all([
      ctl(["--help"]),
      ctl([]),
      ctl(["frobnicate"]),
      ctl(["runs", "--bogus"]),
      ctl(["wiat", "RUN"]),
      ctl(["runs", "--limt", "3"]),
      ctl(["wait", "RUN", "--for", "aproval"]),
    ]);
    assert.equal(typo.code, 64);
    assert.match(typo.stderr, /unknown command "wiat" \(did you mean wait\?\)/);
    assert.equal(flagTypo.code, 64);
    assert.match(flagTypo.stderr, /Unknown option '--limt' \(did you mean --limit\?\)/);
    assert.equal(badFor.code, 64);
    assert.match(badFor.stderr, /--for must be end or approval .*did you mean approval\?/);
    assert.doesNotMatch(unknown.stderr, /did you mean/);
    assert.match(top.stdout, /3 +the run waits for a person/);
    assert.equal(top.code, 0);
    for (const n of names) assert.ok(top.stdout.includes(`  ${n} `), n);
    assert.match(top.stdout, /Exit codes:/);
    assert.equal(bare.code, 64);
    assert.equal(unknown.code, 64);
    assert.match(unknown.stderr, /unknown command "frobnicate"/);
    assert.equal(badFlag.code, 64);
    assert.match(badFlag.stderr, /Unknown option '--bogus'[\s\S]*agentctl runs --help/);
  });
});
