/**
 * agentctl never lets a model, a tool or a repository drive the approver's terminal: the
 * real bin/agentctl against a real `agentd dev` (a scripted model, the test sandbox image),
 * where everything the run holds is hostile — the repository's file (tool output), the
 * model's command (an approval preview, a tool call), a file the command creates (a name
 * with ESC and a bidi override: the diff, the preview, the patch artifact) and the model's
 * last message — each carrying OSC 52 (`rm -rf ~` into the clipboard), a screen clear and
 * home followed by a fake "✔ approved by admin", C1 controls (8-bit CSI/OSC/DCS/ST), DCS,
 * APC, PM, SOS and OSC 8 sequences, agentctl's own SGR colors (a green fake line), bidi
 * controls and zero-width characters.
 *
 * The bytes every command writes are checked: no ESC at all off a terminal (no color
 * there), no C0 but tab/newline, no C1, no bidi or zero-width character, whatever the
 * command (run, events, get, replay, wait, verify, approvals, approve, artifact get, an
 * error quoting server text) and format (text, name, yaml, jsonpath, json); the escapes
 * are visible (`\x1b]52;`, `\u202e`). On a real terminal (a pty from script(1)), the
 * inline approval prompt's screen holds only agentctl's own sequences (its colors, the
 * status line's erase, readline's line editing) and the fake line never starts a line.
 * The -o json texts parse back to the hostile values intact.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { type AgentdProcess, startAgentd } from "../../internal/testing/agentd-process.ts";
import { sandboxImage } from "../../internal/testing/docker.ts";
import {
  type OpenAiStub,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../../internal/testing/openai-stub.ts";

const AGENTCTL = fileURLToPath(new URL("../../bin/agentctl", import.meta.url));

// The hostile parts, each of which must never reach a terminal raw.
const OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"; // base64 of "rm -rf ~", into the clipboard
const CLEAR = "\x1b[2J\x1b[H";
const FAKE = "✔ approved by admin";
const BIDI = "\u202egnp.exe\u202c \u2066x\u2069 \u200e\u200f\u061c";
const ZW = "a\u200bb\u200cc\u200dd\u2060e\ufefff\u2064g";
const C1 = "\u009b31m \u009d0;t\u0007 \u0090q\u009c";
const SEQS =
  "\x1bP1$r\x1b\\ \x1b_apc\x1b\\ \x1b^pm\x1b\\ \x1bXsos\x1b\\ \x1b]8;;http://e\x1b\\l\x1b]8;;\x1b\\";
/** agentctl's own colors (green, bold) in model text: shown escaped, never in agentctl's colors. */
const SGR = `\x1b[32m${FAKE}\x1b[39m \x1b[1mbold\x1b[22m`;
const HOSTILE = `${OSC52}${CLEAR}${FAKE} ${BIDI} ${ZW} ${C1} ${SEQS} ${SGR}\r`;
/** A file name the model's command creates: ESC (an OSC title) and a bidi override. */
const EVIL_NAME = "f\x1b]0;pwn\x07\u202eg.txt";
/** The command that needs approval (rm): `;` separated, hostile text in it. */
const COMMAND = `echo '${OSC52}${BIDI}' > '${EVIL_NAME}'; echo '${OSC52}${CLEAR}${FAKE}\u200b'; rm -f gone.txt`;
const MESSAGE = `done ${HOSTILE}`;

/** What the brief lists, written out here (not the implementation's own class). */
const FORBIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are what must never appear
  /[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

let dir: string;
let repo: string;
let stub: OpenAiStub;
let server: AgentdProcess;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith("AGENTD_") && k !== "FORCE_COLOR" && k !== "NO_COLOR") e[k] = v;
  return { ...e, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", ...extra };
}

function collect(child: ChildProcess): Promise<Result> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

/** agentctl with pipes for stdout and stderr (no terminal). */
function ctl(args: string[]): Promise<Result> {
  return collect(
    spawn(AGENTCTL, ["--addr", server.addr, ...args], {
      env: env(),
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 180_000, // a safety net for a hung client, never hit by a slow one
    }),
  );
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * agentctl on a pseudo-terminal (script(1)): stdout, stderr and stdin are the terminal.
 * `answer` is typed once `prompt` shows.
 */
function onTerminal(args: string[], answer?: { prompt: string; text: string }): Promise<Result> {
  const line = [AGENTCTL, "--addr", server.addr, ...args].map(shellQuote).join(" ");
  const child = spawn("script", ["-q", "-e", "-f", "-c", line, "/dev/null"], {
    env: env({ TERM: "xterm-256color" }),
    cwd: dir,
    stdio: ["pipe", "pipe", "pipe"],
    timeout: 300_000,
  });
  let seen = "";
  let answered = answer === undefined;
  child.stdout?.on("data", (c: Buffer) => {
    seen += c.toString("utf8");
    if (!answered && answer !== undefined && seen.includes(answer.prompt)) {
      answered = true;
      child.stdin?.write(answer.text);
    }
  });
  return collect(child);
}

/** The checks on bytes written off a terminal: nothing of the forbidden set, no ESC at all. */
function assertClean(text: string, what: string): void {
  const hit = FORBIDDEN.exec(text);
  assert.equal(
    hit,
    null,
    `${what} wrote U+${hit?.[0].codePointAt(0)?.toString(16).padStart(4, "0")} raw at ${hit?.index}: ${JSON.stringify(text.slice(Math.max(0, (hit?.index ?? 0) - 60), (hit?.index ?? 0) + 60))}`,
  );
}

/** The escapes are visible: a person sees that something was there. */
function assertShown(text: string, what: string, parts: string[]): void {
  for (const p of parts) assert.ok(text.includes(p), `${what}: no ${p} in:\n${text}`);
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
    cwd,
    encoding: "utf8",
    env: env(),
  });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentctl-hostile-"));
  stub = await startOpenAiStub(({ body }) => {
    const n = (body.messages as { role: string }[]).filter((x) => x.role === "tool").length;
    const call = (id: string, name: string, args: unknown) => ({
      chunks: toolCallsReply([{ id, name, arguments: JSON.stringify(args) }]),
    });
    if (n === 0) return call("c1", "process_run", { command: "cat notes.txt" });
    if (n === 1) return call("c2", "process_run", { command: COMMAND });
    return { chunks: textReply([MESSAGE.slice(0, 9), MESSAGE.slice(9)]) };
  });
  const policy = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8").replace(
    /# image: agentd-sandbox-base:latest/,
    `image: ${sandboxImage("test")}`,
  );
  assert.ok(policy.includes(sandboxImage("test")));
  writeFileSync(join(dir, "policy.yaml"), policy);
  server = await startAgentd(
    "dev",
    ["--data-dir", join(dir, "data"), "--policy", join(dir, "policy.yaml")],
    { env: { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL } },
  );
  repo = join(dir, "repo");
  for (const [p, data] of Object.entries({
    "notes.txt": `${HOSTILE}\nsecond line\r\n`,
    "gone.txt": "x\n",
  })) {
    mkdirSync(dirname(join(repo, p)), { recursive: true });
    writeFileSync(join(repo, p), data);
  }
  git(repo, "init", "-q");
  git(repo, "add", ".");
  git(repo, "commit", "-qm", "init");
});

after(async () => {
  await server?.stop("SIGKILL");
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("agentctl with hostile model, tool and repository text", () => {
  let runId = "";
  let approvalId = "";

  it("run --follow --no-wait (pipes): the story and the approval hint hold no raw control or bidi character", async () => {
    const res = await ctl([
      "run",
      "--repo",
      repo,
      "--prompt",
      `do it ${OSC52}`,
      "--follow",
      "--no-wait",
    ]);
    assert.equal(res.code, 3, res.stderr + res.stdout);
    assertClean(res.stdout, "run --follow stdout");
    assertClean(res.stderr, "run --follow stderr");
    runId = /run ([0-9A-HJKMNP-TV-Z]{26}) created/.exec(res.stderr)?.[1] ?? "";
    approvalId = /agentctl approve (apr_\S+)/.exec(res.stderr)?.[1] ?? "";
    assert.ok(runId !== "" && approvalId !== "", res.stderr);
    // The tool output (the repository's file) and the command, escaped where they show.
    assertShown(res.stdout, "run --follow", [
      "\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H✔ approved by admin",
      "\\u202egnp.exe\\u202c",
      "a\\u200bb\\u200cc\\u200dd\\u2060e\\ufefff\\u2064g",
      "\\x9b31m \\x9d0;t\\x07 \\x90q\\x9c",
      "\\x1bP1$r\\x1b\\ \\x1b_apc",
      "\\x1b[32m✔ approved by admin\\x1b[39m \\x1b[1mbold\\x1b[22m",
      "  │ second line\n",
      // The preview shows the line as it runs, `;` and all.
      `command: echo '\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202egnp.exe\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c' > 'f\\x1b]0;pwn\\x07\\u202eg.txt'; echo`,
      "; rm -f gone.txt",
    ]);
    for (const l of res.stdout.split("\n"))
      assert.ok(!l.trimStart().startsWith(FAKE), `a line starts with the fake text: ${l}`);
  });

  it("approvals in every format: text, name, yaml, jsonpath and json (which keeps the values)", async () => {
    const [text, name, yaml, jp, json] = await Promise.all([
      ctl(["approvals", "--run", runId]),
      ctl(["approvals", "--run", runId, "-o", "name"]),
      ctl(["approvals", "--run", runId, "-o", "yaml"]),
      ctl(["approvals", "--run", runId, "-o", "jsonpath={.items[0].preview.argv[*]}"]),
      ctl(["approvals", "--run", runId, "-o", "json"]),
    ]);
    for (const [what, r] of Object.entries({ text, name, yaml, jp, json })) {
      assert.equal(r.code, 0, `${what}: ${r.stderr}`);
      assertClean(r.stdout, `approvals ${what}`);
      assertClean(r.stderr, `approvals ${what} stderr`);
    }
    assertShown(text.stdout, "approvals", [
      approvalId,
      `command: echo '\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202egnp.exe\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c' > 'f\\x1b]0;pwn\\x07\\u202eg.txt'; echo '\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H✔ approved by admin\\u200b'; rm -f gone.txt`,
    ]);
    assert.equal(name.stdout, `approval/${approvalId}\n`);
    const fromJson = JSON.parse(json.stdout).items[0].preview;
    assert.ok(fromJson.argv.includes(EVIL_NAME), "the JSON values are intact");
    const quoted = /^run ("(?:[^"\\]|\\.)*") in /s.exec(fromJson.summary)?.[1];
    assert.equal(JSON.parse(quoted ?? '""'), COMMAND, fromJson.summary);
    assert.deepEqual(parseYaml(yaml.stdout).items[0].preview, fromJson);
    assertShown(jp.stdout, "jsonpath", ["f\\x1b]0;pwn\\x07\\u202eg.txt ", "\\x1b[2J"]);
  });

  it("errors quoting server text (a hostile approval id, a hostile selector) are escaped", async () => {
    const [approve, runs] = await Promise.all([
      ctl(["approve", `apr_${OSC52}${CLEAR}${FAKE}\u202e`]),
      ctl(["runs", "--selector", `a=${OSC52}${CLEAR}${FAKE}\u202e`]),
    ]);
    for (const [what, r] of Object.entries({ approve, runs })) {
      assert.notEqual(r.code, 0, what);
      assertClean(r.stdout, `${what} error stdout`);
      assertClean(r.stderr, `${what} error stderr`);
    }
    assert.match(
      runs.stderr,
      /label_selector: "a=\\u001b\]52;c;cm0gLXJmIH4=\\u0007\\u001b\[2J\\u001b\[H✔ approved by admin\\u202e"/,
    );
  });

  it("approve, then wait, events (text, json, yaml, name, jsonpath), get, replay and verify", async () => {
    const ok = await ctl(["approve", approvalId, "--reason", `ok ${BIDI}`]);
    assert.equal(ok.code, 0, ok.stderr);
    assertClean(ok.stdout + ok.stderr, "approve");
    const wait = await ctl(["wait", runId]);
    assert.equal(wait.code, 0, wait.stderr + wait.stdout);
    assertClean(wait.stdout + wait.stderr, "wait");
    const runs = {
      events: await ctl(["events", runId]),
      eventsJson: await ctl(["events", runId, "--json"]),
      eventsYaml: await ctl(["events", runId, "-o", "yaml"]),
      eventsName: await ctl(["events", runId, "-o", "name"]),
      eventsJp: await ctl(["events", runId, "-o", "jsonpath={.items[*].outputMessage.text}"]),
      get: await ctl(["get", runId]),
      getYaml: await ctl(["get", runId, "-o", "yaml"]),
      runs: await ctl(["runs"]),
      replay: await ctl(["replay", runId]),
      verify: await ctl(["verify", runId]),
    };
    for (const [what, r] of Object.entries(runs)) {
      assert.equal(r.code, 0, `${what}: ${r.stderr}`);
      assertClean(r.stdout, what);
      assertClean(r.stderr, `${what} stderr`);
    }
    assertShown(runs.events.stdout, "events", [
      "output.message       assistant: done \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H✔ approved by admin",
      'by local: "ok \\u202egnp.exe',
    ]);
    assertShown(runs.replay.stdout, "replay", [
      "done \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H✔ approved by admin \\u202egnp.exe",
      "  │ \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H✔ approved by admin\\u200b\n",
    ]);
    assertShown(runs.get.stdout, "get", ["done \\x1b]52;c;"]);
    // NDJSON: every line parses back to the run's values, the hostile message intact.
    const events = runs.eventsJson.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.ok(events.some((e) => e.outputMessage?.text === MESSAGE));
    assert.ok(
      parseYaml(runs.eventsYaml.stdout).items.some(
        (e: { outputMessage?: { text: string } }) => e.outputMessage?.text === MESSAGE,
      ),
    );
    assert.match(runs.verify.stdout, /hash chain OK/);
  });

  it("artifact get: raw into a pipe (git apply needs the bytes), escaped on a terminal", async () => {
    const [piped, tty] = await Promise.all([
      ctl(["artifact", "get", runId]),
      onTerminal(["artifact", "get", runId]),
    ]);
    assert.equal(piped.code, 0, piped.stderr);
    assert.equal(tty.code, 0, tty.stdout);
    assert.ok(piped.stdout.includes(`+${OSC52}${BIDI}\n`), "the pipe gets the bytes as they are");
    assert.ok(
      tty.stdout.includes("+\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202egnp.exe"),
      `the terminal gets them escaped:\n${tty.stdout}`,
    );
    assertClean(tty.stdout.replaceAll("\r\n", "\n"), "artifact get on a terminal");
    assert.ok(!tty.stdout.includes("\x1b"), "no ESC on the terminal at all");
  });

  it("run --follow on a terminal: the approval prompt's screen holds only agentctl's own sequences", async () => {
    const res = await onTerminal(
      ["run", "--repo", repo, "--prompt", `do it again ${CLEAR}`, "--follow"],
      { prompt: "approve?", text: "y\n" },
    );
    assert.equal(res.code, 0, res.stdout);
    const screen = res.stdout;
    assert.ok(screen.includes("approve?"), screen);
    assert.ok(screen.includes("✔ completed"), screen);
    // agentctl's colors (style.ts), the status line's erase, readline's line editing.
    const own =
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the sequences allowed
      /\x1b\[(?:1|2|22|31|32|33|35|36|39)m|\x1b\[2K|\x1b\[\d*[GJK]|\x1b\[\?2004[hl]/g;
    const rest = screen.replace(own, "").replaceAll("\r", "");
    assertClean(rest, "run --follow on a terminal");
    for (const bad of ["\x1b[2J", "\x1b[H", "\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x1bX"])
      assert.ok(!screen.includes(bad), `no ${JSON.stringify(bad)} on the terminal`);
    assertShown(rest, "terminal", [
      "\\x1b]52;c;cm0gLXJmIH4=\\x07",
      "\\u202egnp.exe",
      "\\x1b[32m✔ approved by admin\\x1b[39m \\x1b[1mbold\\x1b[22m",
    ]);
    // Colors are on, and they are agentctl's only: the model's green fake line is text.
    assert.ok(screen.includes("\x1b[32m\x1b[1m✔ completed"), "agentctl's own colors are on");
    assert.ok(
      screen.includes("\x1b[1m\x1b[33mapprove?\x1b[39m\x1b[22m"),
      "the approval prompt (written by readline) in agentctl's colors",
    );
    assert.ok(!screen.includes(`\x1b[32m${FAKE}`), "the model's text is never in agentctl's green");
    assert.ok(!screen.includes("\x1b[1mbold"), "nor in its bold");
  });
});
