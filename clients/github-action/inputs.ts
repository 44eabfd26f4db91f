/**
 * The action's inputs, read from the environment the composite step gives its script
 * (`INPUT_ADDRESS`, `INPUT_TOKEN`, … mapped in action.yml) and from what the runner sets
 * (`GITHUB_RUN_ID`, `GITHUB_JOB`, `RUNNER_TEMP`…), checked before anything is sent.
 *
 * Must never: put the token into an error message, or accept a value the server or
 * agentctl would read differently than the workflow's author meant (a bad value is an
 * InputError naming the input and what was expected).
 */
import { createHash } from "node:crypto";
import { isAbsolute, resolve } from "node:path";

/** A bad input: the message names it; the action exits 64 (usage) without calling agentd. */
export class InputError extends Error {
  override name = "InputError";
}

export interface ActionInputs {
  /** agentd's address: HOST:PORT or http(s)://HOST:PORT. */
  address: string;
  /** Bearer token; undefined for a server without auth (agentd dev). */
  token: string | undefined;
  prompt: string;
  /** KEY=VALUE labels, in the order given. */
  labels: string[];
  skills: string[];
  idempotencyKey: string;
  /** True: wait through approvals until the run ends; false: return at the first one. */
  waitForApproval: boolean;
  /** Absolute path of the directory to pack. */
  repo: string;
  caFile: string | undefined;
  /** The console's base URL (its `/ui/` page is below it). */
  consoleBase: string;
  maxDuration: string | undefined;
  maxCostUsd: string | undefined;
  /** Where the patch is written (RUNNER_TEMP). */
  tempDir: string;
  /** $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY (undefined outside a runner). */
  outputFile: string | undefined;
  summaryFile: string | undefined;
}

type Env = Record<string, string | undefined>;

const KEY_RE = /^[A-Za-z0-9._:/+=-]{1,255}$/;
const LABEL_RE = /^[^=\s]+=[^=\s]*$/;

function get(env: Env, name: string): string {
  return (env[`INPUT_${name.toUpperCase().replace(/-/g, "_")}`] ?? "").trim();
}

/** GitHub's YAML booleans, as `core.getBooleanInput` reads them. */
function bool(env: Env, name: string, dflt: boolean): boolean {
  const v = get(env, name);
  if (v === "") return dflt;
  if (["true", "True", "TRUE"].includes(v)) return true;
  if (["false", "False", "FALSE"].includes(v)) return false;
  throw new InputError(
    `input ${name} must be true or false (got ${JSON.stringify(v.slice(0, 40))})`,
  );
}

/** Items of a list input: one a line, or comma-separated; blank items are skipped. */
function list(env: Env, name: string): string[] {
  return get(env, name)
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

function token(env: Env): string | undefined {
  const t = get(env, "token");
  if (t === "") return undefined;
  // Never echoed: only what is wrong with it.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (/[\s\u0000-\u001f\u007f]/.test(t))
    throw new InputError(
      "input token holds whitespace or a control character inside it; give the token alone",
    );
  return t;
}

function address(env: Env): string {
  const a = get(env, "address");
  if (a === "")
    throw new InputError(
      "input address is required: agentd's address, e.g. https://agentd.internal:7070 (usually from a secret: secrets.AGENTD_ADDR)",
    );
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(a) ? a : `http://${a}`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InputError(
      `input address ${JSON.stringify(a.slice(0, 200))} is not an address: give HOST:PORT or http(s)://HOST:PORT`,
    );
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new InputError(
      `input address: only http:// and https:// are supported (got ${u.protocol}//)`,
    );
  if (u.username !== "" || u.password !== "")
    throw new InputError(
      "input address must not hold credentials (user:password@); give the token in input token",
    );
  return a;
}

/** The console's base: input console-url, else the address as a URL; no credentials. */
function consoleBase(env: Env, addr: string): string {
  const given = get(env, "console-url");
  const raw =
    given !== "" ? given : /^[a-z][a-z0-9+.-]*:\/\//i.test(addr) ? addr : `http://${addr}`;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new InputError(
      `input console-url ${JSON.stringify(raw.slice(0, 200))} is not a URL: give http(s)://HOST[:PORT][/PATH]`,
    );
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new InputError(
      `input console-url must be an http:// or https:// URL (got ${u.protocol}//)`,
    );
  if (u.username !== "" || u.password !== "")
    throw new InputError(
      "input console-url must not hold credentials (user:password@): it is shown in the job summary",
    );
  u.hash = "";
  u.search = "";
  return u.href.replace(/\/+$/, "");
}

function prompt(env: Env): string {
  // Not trimmed: the author's text is sent as written (only checked to be there).
  const p = env.INPUT_PROMPT ?? "";
  if (p.trim() === "") throw new InputError("input prompt is required: the task for the agent");
  if (p.includes("\u0000")) throw new InputError("input prompt holds a NUL character");
  return p;
}

/** Text as a label value, as agentd's toLabelValue makes one (internal/api/labels.ts). */
function labelValue(text: string): string {
  const trim = (s: string) => s.replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
  const clean = trim(text.replace(/[^A-Za-z0-9._-]+/g, "-"));
  if (clean.length <= 63) return clean;
  return `${trim(clean.slice(0, 54))}-${createHash("sha256").update(text).digest("hex").slice(0, 8)}`;
}

/**
 * The `repo` label agentctl gives a run from the checkout's origin (`github.com-OWNER-NAME`),
 * set here from GITHUB_SERVER_URL and GITHUB_REPOSITORY: in the agentd image there is no git
 * to read the origin with, and trust rules count per repo. Undefined off a runner.
 */
export function repoLabel(env: Env): string | undefined {
  const repository = env.GITHUB_REPOSITORY ?? "";
  if (repository === "") return undefined;
  let host = "github.com";
  try {
    host = new URL(env.GITHUB_SERVER_URL || "https://github.com").host;
  } catch {
    // GitHub's own host, as on github.com.
  }
  const v = labelValue(`${host}/${repository}`);
  return v === "" ? undefined : `repo=${v}`;
}

function labels(env: Env): string[] {
  const items = list(env, "labels");
  for (const l of items) {
    if (!LABEL_RE.test(l))
      throw new InputError(
        `input labels: ${JSON.stringify(l.slice(0, 100))} is not KEY=VALUE (one a line or comma-separated; Kubernetes label syntax)`,
      );
  }
  const repo = repoLabel(env);
  if (repo !== undefined && !items.some((l) => l.startsWith("repo="))) items.push(repo);
  return items;
}

/**
 * The default key: the workflow run, the job and a digest of the request's own inputs. A
 * re-run of the job (same run id, a later attempt) asks for the same run and gets it back;
 * two agent steps with different prompts in one job get two runs.
 */
export function defaultIdempotencyKey(env: Env, parts: readonly string[]): string {
  const runId = env.GITHUB_RUN_ID ?? "";
  if (runId === "")
    throw new InputError(
      "input idempotency-key: not given, and GITHUB_RUN_ID (set by the runner) is empty to derive one from",
    );
  const digest = createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 16);
  const raw = ["gh", env.GITHUB_REPOSITORY ?? "", runId, env.GITHUB_JOB ?? "", digest].join(":");
  return raw.replace(/[^A-Za-z0-9._:/+=-]/g, "_").slice(0, 255);
}

function idempotencyKey(env: Env, parts: readonly string[]): string {
  const k = get(env, "idempotency-key");
  if (k === "") return defaultIdempotencyKey(env, parts);
  if (!KEY_RE.test(k))
    throw new InputError(
      `input idempotency-key must be 1-255 characters of [A-Za-z0-9._:/+=-] (got ${JSON.stringify(k.slice(0, 60))})`,
    );
  return k;
}

function repo(env: Env): string {
  const r = get(env, "repo");
  const base = env.GITHUB_WORKSPACE || process.cwd();
  return r === "" ? resolve(base) : isAbsolute(r) ? r : resolve(base, r);
}

/** Reads and checks every input; throws InputError naming the first bad one. */
export function readInputs(env: Env): ActionInputs {
  const addr = address(env);
  const p = prompt(env);
  const l = labels(env);
  const skills = list(env, "skills");
  const dir = repo(env);
  const maxDuration = get(env, "max-duration");
  const maxCostUsd = get(env, "max-cost-usd");
  const caFile = get(env, "ca-file");
  return {
    address: addr,
    token: token(env),
    prompt: p,
    labels: l,
    skills,
    idempotencyKey: idempotencyKey(env, [p, ...l, "", ...skills, "", maxDuration, maxCostUsd]),
    waitForApproval: bool(env, "wait-for-approval", true),
    repo: dir,
    caFile: caFile === "" ? undefined : caFile,
    consoleBase: consoleBase(env, addr),
    maxDuration: maxDuration === "" ? undefined : maxDuration,
    maxCostUsd: maxCostUsd === "" ? undefined : maxCostUsd,
    tempDir: env.RUNNER_TEMP || "/tmp",
    outputFile: env.GITHUB_OUTPUT || undefined,
    summaryFile: env.GITHUB_STEP_SUMMARY || undefined,
  };
}
