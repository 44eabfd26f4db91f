/**
 * The GitHub Action end to end, called the way a runner calls it (runner-fixture.ts:
 * action.yml's env mapping, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, RUNNER_TEMP, bash -eo
 * pipefail), against a real `agentd dev` with an auth file, a scripted OpenAI-compatible
 * model and the test sandbox image. Most cases use the repository's bin/agentctl (input
 * agentctl: the same agentctl the image carries); one runs the step in the agentd image
 * (deploy/image/.built/agentd.tag, `make image`) as the action's default does.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
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
import { runStep, type StepRun } from "./runner-fixture.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const AGENTCTL = join(ROOT, "bin", "agentctl");
const NODE_DIR = dirname(process.execPath);
const CI_TOKEN = "ci-token-0123456789abcdef";
const ADMIN_TOKEN = "admin-token-fedcba9876543210";

/** What a hostile model and prompt write: Markdown, HTML, workflow commands, delimiters. */
const HOSTILE = [
  "</pre></details>| x | <img src=x onerror=alert(1)> [click](https://evil.example/)",
  "![i](https://evil.example/i.png) `code` **bold** # heading @octocat",
  "\r::set-output name=outcome::completed",
  "::add-mask::x",
  "ghadelimiter_00\noutcome<<EOF\ncompleted\nEOF",
  "<script>alert(1)</script>",
].join("\n");

let dir: string;
let repo: string;
let stub: OpenAiStub;
let server: AgentdProcess;
let runNo = 0;

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
  });
}

/** agentctl as the test's own tool (approving, reading), with the admin token. */
function admin(args: string[]): { code: number; stdout: string; stderr: string } {
  try {
    const stdout = execFileSync(AGENTCTL, args, {
      encoding: "utf8",
      env: { ...process.env, AGENTD_ADDR: server.url, AGENTD_TOKEN: ADMIN_TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr: "" };
  } catch (err) {
    const e = err as { status: number; stdout: string; stderr: string };
    return { code: e.status, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The step with the host's agentctl, a fresh workflow run id unless `runId` is given. */
function step(
  inputs: Record<string, string>,
  o: { runId?: string; image?: boolean; onSpawn?: (pid: number) => void } = {},
): Promise<StepRun> {
  runNo++;
  return runStep(
    {
      address: server.url,
      token: CI_TOKEN,
      ...(o.image === true ? {} : { agentctl: AGENTCTL }),
      ...inputs,
    },
    {
      PATH: `${NODE_DIR}:${process.env.PATH ?? ""}`,
      GITHUB_RUN_ID: o.runId ?? `${Date.now()}${runNo}`,
      GITHUB_RUN_ATTEMPT: "1",
      GITHUB_JOB: "agent",
      GITHUB_REPOSITORY: "acme/widgets",
      GITHUB_SERVER_URL: "https://github.com",
    },
    { workspace: repo, ...(o.onSpawn === undefined ? {} : { onSpawn: o.onSpawn }) },
  );
}

/** Waits (up to 120 s) for the pending approval of the run given `prompt`; the person's view. */
async function approvalFor(prompt: string): Promise<{ approvalId: string; runId: string }> {
  for (let i = 0; i < 240; i++) {
    const listed = admin(["approvals", "--json"]);
    for (const line of listed.stdout.split("\n").filter((l) => l !== "")) {
      const a = JSON.parse(line);
      const run = JSON.parse(admin(["get", a.runId, "--json"]).stdout);
      if (run.prompt === prompt) return { approvalId: a.approvalId, runId: a.runId };
    }
    await new Promise((res) => setTimeout(res, 500));
  }
  throw new Error(`no approval of the run with prompt ${JSON.stringify(prompt)} within 120 s`);
}

/** A job cancelled while the step waits at an approval: SIGINT to the step's process. */
async function cancelAtApproval(prompt: string, image: string | undefined): Promise<void> {
  let pid = 0;
  const runId = `${Date.now()}${runNo}`;
  const done = step(
    { prompt, ...(image === undefined ? {} : { image }) },
    { runId, image: image !== undefined, onSpawn: (p) => (pid = p) },
  );
  const waiting = await approvalFor(prompt);
  assert.ok(pid > 0);
  process.kill(pid, "SIGINT");
  const r = await done;
  assert.equal(r.code, 130, show(r));
  // In the image, docker stop gives main.ts a SIGTERM.
  assert.match(r.stdout, /SIG(INT|TERM): stopped waiting; the run goes on/);
  const run = JSON.parse(admin(["get", waiting.runId, "--json"]).stdout);
  assert.equal(run.state, "RUN_STATE_PAUSED", "the run goes on: it still waits for its approval");
  assert.equal(run.pendingApprovalId, waiting.approvalId);
  if (image !== undefined) {
    const left = execFileSync("docker", ["ps", "-aq", "--filter", `name=agentd-action-${runId}-`], {
      encoding: "utf8",
    });
    assert.equal(left.trim(), "", "no container is left behind");
  }
  admin(["cancel", waiting.runId, "--reason", "test done"]);
}

function show(r: StepRun): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- summary\n${r.summary}`;
}

/** Lines of the log the runner would read as workflow commands. */
function commands(r: StepRun): string[] {
  return r.stdout
    .split(/\r\n|\r|\n/)
    .map((l) => l.trimStart())
    .filter((l) => l.startsWith("::"));
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-action-"));
  stub = await startOpenAiStub(({ body }) => {
    const msgs = JSON.stringify(body.messages);
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    const call = (id: string, name: string, args: unknown) => ({
      chunks: toolCallsReply([{ id, name, arguments: JSON.stringify(args) }]),
    });
    if (msgs.includes("please fail"))
      return { status: 401, body: { error: { message: "bad key" } } };
    if (msgs.includes("hostile")) {
      // A denied command full of Markdown, HTML and workflow commands; then such a message.
      if (n === 0)
        return call("h1", "process_run", { command: `sudo echo ${JSON.stringify(HOSTILE)}` });
      return { chunks: textReply([HOSTILE]) };
    }
    if (msgs.includes("config")) {
      // config.yaml is a configuration file: patching it waits for a person.
      if (n === 0)
        return call("a1", "repo_patch", {
          path: "config.yaml",
          edits: [{ oldText: "a: 1", newText: "a: 2" }],
        });
      return { chunks: textReply(["Changed the config."]) };
    }
    if (n === 0) return call("c1", "repo_read", { path: "greet.txt" });
    if (n === 1)
      return call("c2", "process_run", {
        command: "sed -i s/helo/hello/ greet.txt && cat greet.txt",
      });
    return { chunks: textReply(["Fixed the greeting."]) };
  });
  const policy = readFileSync(join(ROOT, "policy.yaml"), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")), "the policy names the test sandbox image");
  writeFileSync(join(dir, "policy.yaml"), policy);
  const auth = writeAuthFile(dir, [
    { token: CI_TOKEN, tenant: "acme", roles: ["submit", "read"] },
    { token: ADMIN_TOKEN, tenant: "acme", roles: ["admin"] },
  ]);
  server = await startAgentd(
    "dev",
    ["--data-dir", join(dir, "data"), "--policy", join(dir, "policy.yaml"), "--auth-file", auth],
    { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
  );
  repo = join(dir, "workspace");
  mkdirSync(repo);
  writeFileSync(join(repo, "greet.txt"), "helo\n");
  writeFileSync(join(repo, "config.yaml"), "a: 1\n");
  git(repo, "init", "-q");
  git(repo, "add", ".");
  git(repo, "commit", "-qm", "init");
});

after(async () => {
  await server?.stop("SIGKILL");
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The agentd image `make image` built last. */
function agentdImage(): string {
  return readFileSync(join(ROOT, "deploy", "image", ".built", "agentd.tag"), "utf8").trim();
}

/** Applies `patch` to a fresh clone of the workspace; returns greet.txt after. */
function applyToClone(patch: string, name: string): string {
  const clone = join(dir, name);
  execFileSync("git", ["clone", "-q", repo, clone]);
  git(clone, "apply", "--check", patch);
  git(clone, "apply", patch);
  return readFileSync(join(clone, "greet.txt"), "utf8");
}

describe("the agentd GitHub Action against agentd dev", () => {
  const rerunId = `${Date.now()}77`;
  let firstRunId = "";

  it("a completed run: outputs run-id, outcome completed and a patch that applies; the summary lists the calls and links to the console", async () => {
    const r = await step(
      { prompt: "fix the greeting", labels: "pipeline=agent-fix\nteam=web" },
      { runId: rerunId },
    );
    assert.equal(r.code, 0, show(r));
    const out = r.actionOutputs;
    assert.match(out["run-id"] ?? "", /^[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(out.outcome, "completed");
    assert.equal(out["approval-id"], "");
    assert.equal(out["run-url"], `${server.url}/ui/#/runs/${out["run-id"]}`);
    assert.equal(dirname(out["patch-path"] ?? ""), r.runnerTemp, "the patch is in RUNNER_TEMP");
    assert.equal(applyToClone(out["patch-path"] as string, "clone-1"), "hello\n");
    for (const want of [
      `### agentd run \`${out["run-id"]}\`: ✅ completed`,
      `[Open the run in agentd's console](${server.url}/ui/#/runs/${out["run-id"]})`,
      "| # | tool | call | policy | result |",
      "| 1 | repo&#46;read | greet&#46;txt | auto",
      "| 2 | process&#46;run | &#36; sed &#45;i s&#47;helo&#47;hello&#47; greet&#46;txt &#38;&#38; cat greet&#46;txt |",
      "Fixed the greeting&#46;",
      "Hash chain verified, head ",
    ]) {
      assert.ok(r.summary.includes(want), `missing ${JSON.stringify(want)} in:\n${show(r)}`);
    }
    assert.match(
      r.summary,
      /\*\*Patch:\*\* .*agentd&#45;[0-9A-Z]{26}&#46;patch \(sha256 [0-9a-f]{64}\)/,
    );
    const run = JSON.parse(admin(["get", out["run-id"] as string, "--json"]).stdout);
    assert.equal(run.labels.pipeline, "agent-fix");
    assert.equal(run.labels.team, "web");
    assert.equal(
      run.labels.repo,
      "github.com-acme-widgets",
      "the label agentctl gives a checkout of it",
    );
    assert.deepEqual(
      commands(r),
      [`::add-mask::${CI_TOKEN}`],
      "the only workflow command is the mask",
    );
    assert.ok(
      !r.stdout.replace(`::add-mask::${CI_TOKEN}`, "").includes(CI_TOKEN),
      "the token is not in the log",
    );
    firstRunId = out["run-id"] as string;
  });

  it("a re-run of the job (same workflow run, next attempt) gets the same run back and says so", async () => {
    assert.ok(firstRunId !== "", "the completed run came first");
    const r = await step(
      { prompt: "fix the greeting", labels: "pipeline=agent-fix\nteam=web" },
      { runId: rerunId },
    );
    assert.equal(r.code, 0, show(r));
    assert.equal(r.actionOutputs["run-id"], firstRunId);
    assert.equal(r.actionOutputs.outcome, "completed");
    assert.match(r.stdout, /\nagentctl: reused run 0/);
    assert.match(r.summary, /an earlier attempt of this job created the run/);
    assert.equal(applyToClone(r.actionOutputs["patch-path"] as string, "clone-2"), "hello\n");
  });

  it("wait-for-approval false: returns when the run waits for a person, outcome waiting, exit 0, the approval id", async () => {
    const r = await step({ prompt: "change the config", "wait-for-approval": "false" });
    assert.equal(r.code, 0, show(r));
    const out = r.actionOutputs;
    assert.equal(out.outcome, "waiting");
    assert.equal(out["patch-path"], "");
    assert.match(out["approval-id"] ?? "", /^apr_/);
    assert.match(r.summary, /⏸ waiting for a person/);
    assert.ok(r.summary.includes("approval pending"), show(r));
    assert.ok(
      r.summary.includes(
        `approval <code>${(out["approval-id"] as string).replace(/_/g, "&#95;")}</code>`,
      ),
      show(r),
    );
    const pending = admin(["approvals", "--run", out["run-id"] as string]);
    assert.ok(
      pending.stdout.includes(out["approval-id"] as string),
      "the approval is still pending",
    );
    assert.ok(
      commands(r).some((c) => c.startsWith("::notice title=agentd run waits for a person::")),
      show(r),
    );
    admin(["cancel", out["run-id"] as string, "--reason", "test done"]);
  });

  it("wait-for-approval true: waits through the approval a person gives, then completes", async () => {
    const stepDone = step({ prompt: "change the config, approved" });
    // The person: waits for the approval of this step's run and approves it.
    const { approvalId } = await approvalFor("change the config, approved");
    assert.equal(admin(["approve", approvalId, "--reason", "ok from the test"]).code, 0);
    const r = await stepDone;
    assert.equal(r.code, 0, show(r));
    assert.equal(r.actionOutputs.outcome, "completed");
    assert.ok(r.summary.includes("needs approval"), show(r));
    assert.ok(r.summary.includes("approved by"), show(r));
    assert.ok(r.summary.includes("ok from the test"), show(r));
    assert.ok(
      commands(r).some((c) => c.startsWith("::notice title=agentd run waits for a person::")),
    );
    const patch = readFileSync(r.actionOutputs["patch-path"] as string, "utf8");
    assert.match(patch, /\+a: 2/);
  });

  it("a failed run: exit 1, outcome failed, the error in the summary and an annotation", async () => {
    const r = await step({ prompt: "please fail" });
    assert.equal(r.code, 1, show(r));
    assert.equal(r.actionOutputs.outcome, "failed");
    assert.equal(r.actionOutputs["patch-path"], "");
    assert.match(r.summary, /❌ failed/);
    assert.match(r.summary, /Why it did not complete/);
    assert.match(r.summary, /EMODEL&#95;AUTH/);
    const error = commands(r).find((c) => c.startsWith("::error title=agentd run failed::"));
    assert.ok(error, show(r));
    assert.match(error, /EMODEL_AUTH/);
  });

  it("hostile prompt and model text stay text: no Markdown, HTML, output or workflow command gets through", async () => {
    const r = await step({ prompt: `hostile ${HOSTILE}` });
    assert.equal(r.code, 0, show(r));
    assert.deepEqual(Object.keys(r.outputs).sort(), [
      "approval-id",
      "outcome",
      "patch-path",
      "run-id",
      "run-url",
    ]);
    assert.equal(r.outputs.outcome, "completed");
    assert.deepEqual(commands(r), [`::add-mask::${CI_TOKEN}`], "no workflow command from the run");
    // The denied call is in the table, with the rule's reason.
    assert.match(r.summary, /\| 1 \| process&#46;run \| &#36; sudo echo .* \| denied/);
    for (const bad of [
      "<img",
      "<script",
      "](https://evil",
      "![",
      "@octocat",
      "</details>|",
      "::set-output",
    ]) {
      assert.ok(
        !r.summary.includes(bad),
        `the summary holds ${JSON.stringify(bad)}:\n${r.summary}`,
      );
    }
    assert.equal(
      r.summary.split("<pre>").length,
      r.summary.split("</pre>").length,
      "every <pre> is closed once",
    );
    assert.equal(r.summary.split("</pre>").length - 1, 1, "only the final message's block");
    for (const line of r.summary.split("\n").filter((l) => l.startsWith("| "))) {
      assert.equal(line.split("|").length - 1, 6, `a table row with 5 cells: ${line}`);
    }
    const links = r.summary.match(/\]\(/g) ?? [];
    assert.equal(links.length, 1, "one link: the console's");
  });

  it("a refused token: exit 4, outcome error, a message that says so without the token", async () => {
    const r = await step({ prompt: "fix the greeting", token: "wrong-token-abc" });
    assert.equal(r.code, 4, show(r));
    assert.equal(r.actionOutputs.outcome, "error");
    assert.equal(r.actionOutputs["run-id"], "");
    const error = commands(r).find((c) => c.startsWith("::error"));
    assert.ok(error, show(r));
    assert.match(error, /token/i);
    assert.ok(
      !r.stdout.replace("::add-mask::wrong-token-abc", "").includes("wrong-token-abc"),
      show(r),
    );
    assert.match(r.summary, /agentd run not created/);
  });

  it("bad inputs are refused before anything is sent (exit 64), naming the input", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ prompt: " " }, /input prompt is required/],
      [
        { prompt: "x", labels: "no-equals-sign" },
        /input labels: .*no-equals-sign.* is not KEY=VALUE/,
      ],
      [
        { prompt: "x", "wait-for-approval": "yes" },
        /input wait-for-approval must be true or false/,
      ],
      [{ prompt: "x", "idempotency-key": "has space" }, /input idempotency-key must be 1-255/],
      [{ prompt: "x", "console-url": "javascript:alert(1)" }, /input console-url must be an http/],
      [{ prompt: "x", token: "two\ntokens here" }, /input token holds whitespace/],
    ];
    for (const [inputs, want] of cases) {
      const r = await step(inputs);
      assert.equal(r.code, 64, `${JSON.stringify(inputs)}\n${show(r)}`);
      assert.match(r.stdout, want);
      assert.equal(r.actionOutputs.outcome, "error", "outputs are set for a bad input too");
      assert.ok(!r.stdout.includes("tokens here") || r.stdout.includes("::add-mask::tokens here"));
    }
  });

  it("a cancelled job (SIGINT to the step) stops waiting with exit 130; the run goes on", async () => {
    await cancelAtApproval("change the config, then cancel the job", undefined);
  });

  it("a cancelled job in the image: the container is stopped, not left behind", async () => {
    await cancelAtApproval("change the config, then cancel the image job", agentdImage());
  });

  it("in the agentd image (the default): the same outputs and a patch that applies", async () => {
    const image = agentdImage();
    const r = await step({ prompt: "fix the greeting", image }, { image: true });
    assert.equal(r.code, 0, show(r));
    assert.equal(r.actionOutputs.outcome, "completed");
    assert.match(r.actionOutputs["run-id"] ?? "", /^[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(applyToClone(r.actionOutputs["patch-path"] as string, "clone-image"), "hello\n");
    assert.match(r.summary, /Hash chain verified/);
    const run = JSON.parse(admin(["get", r.actionOutputs["run-id"] as string, "--json"]).stdout);
    assert.equal(run.labels.repo, "github.com-acme-widgets", "the same repo label without git");
    assert.ok(
      !r.stdout.replace(`::add-mask::${CI_TOKEN}`, "").includes(CI_TOKEN),
      "the token is not in the log",
    );
  });
});
