/**
 * Skills: task-specific instructions the context assembler puts into the system prompt.
 * A skill is `<root>/<name>/SKILL.md`: YAML front matter (name, description, version,
 * triggers) and a Markdown body.
 *
 * Discovery order (a name found earlier wins, so a workspace overrides the server):
 *   1. the workspace's `.agent/skills/<name>/SKILL.md`
 *   2. the workspace's `.skills/<name>/SKILL.md`
 *   3. the server's `<serverDir>/<name>/SKILL.md`
 * The workspace lives in the run's container, so its skill files are *input* here
 * (`workspaceFiles`: paths relative to the workspace root plus content, read by the worker
 * through the sandbox); only the server's directory is read from the host.
 *
 * Never: crash or throw on a broken skill file (it is reported in `problems` and skipped);
 * read the workspace from the host; run a trigger regex without a time limit (workspace
 * skills are untrusted input and the worker serves other runs).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import vm from "node:vm";
import { parseDocument } from "yaml";
import { z } from "zod";
import { AgentdError } from "../errors.ts";

/** Skill names: as CreateRun accepts them (internal/api/create-run.ts). */
export const SKILL_NAME_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
/** Largest SKILL.md accepted. */
export const MAX_SKILL_FILE_BYTES = 64 * 1024;
/** Default cap on the rendered text of all selected skills. */
export const DEFAULT_SKILL_BUDGET_BYTES = 32 * 1024;
/**
 * Wall-clock time all regex triggers of one selection may take together, and one of them.
 * Wall clock, not CPU: on a machine loaded enough to keep the thread off a core for 50 ms,
 * even a trivial regex can run out of time (it then counts as no match and is reported).
 */
export const DEFAULT_TRIGGER_LIMITS: TriggerLimits = { totalMs: 200, regexMs: 50 };

/** How long regex triggers may run, ms: all of one selection together, and each one. */
export interface TriggerLimits {
  totalMs: number;
  regexMs: number;
}
/** Only this much of the prompt is matched against regex triggers. */
const TRIGGER_PROMPT_BYTES = 16 * 1024;

/** Where skills are looked for, in order of precedence. */
const WORKSPACE_ROOTS = [".agent/skills", ".skills"] as const;

export interface Skill {
  name: string;
  description: string;
  version: string;
  /** Keywords (whole words, case-insensitive) or `/regex/flags`, matched against the prompt. */
  triggers: string[];
  /** The Markdown body, front matter removed, trimmed. */
  body: string;
  /** Where it was loaded from: "workspace:.agent/skills/x/SKILL.md" or "server:/abs/path". */
  source: string;
}

/** A skill file that could not be used, and why. */
export interface SkillProblem {
  /** The skill's name as far as known (directory name otherwise). */
  name: string;
  file: string;
  message: string;
}

export interface LoadedSkills {
  /** Usable skills, one per name, sorted by name. */
  skills: Skill[];
  /** Broken files, skipped. */
  problems: SkillProblem[];
  /** Valid skills hidden by one of the same name found earlier in the discovery order. */
  shadowed: { name: string; file: string; by: string }[];
}

const TriggerSchema = z
  .string()
  .min(1)
  .max(200)
  .superRefine((t, ctx) => {
    const re = parseRegexTrigger(t);
    if (re === undefined) return;
    try {
      new RegExp(re.source, re.flags);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: `invalid regular expression: ${String(err)}` });
    }
  });

const FrontMatterSchema = z.object({
  name: z.string().regex(SKILL_NAME_RE, "must be [a-z0-9-], at most 64 characters"),
  description: z.string().trim().min(1).max(1024),
  // `version: 1` parses as a number in YAML; accept it as its text.
  version: z.union([z.string().trim().min(1).max(64), z.number().transform(String)]),
  triggers: z.array(TriggerSchema).max(32).default([]),
});

/** `/source/flags` → its parts; anything else is a keyword (undefined). */
function parseRegexTrigger(t: string): { source: string; flags: string } | undefined {
  const m = /^\/(.+)\/([imsu]*)$/s.exec(t);
  return m === null ? undefined : { source: m[1] as string, flags: m[2] as string };
}

/**
 * Parses one SKILL.md. `dirName` is the directory the file is in: the front matter's name
 * must equal it, so an override is always visible from the path alone.
 */
export function parseSkill(
  content: string,
  file: string,
  dirName: string,
  source: string,
): { ok: true; skill: Skill } | { ok: false; problem: SkillProblem } {
  const fail = (message: string, name = dirName) => ({
    ok: false as const,
    problem: { name, file, message },
  });
  if (Buffer.byteLength(content) > MAX_SKILL_FILE_BYTES)
    return fail(`larger than ${MAX_SKILL_FILE_BYTES} bytes`);
  const m = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|$)/.exec(content);
  if (m === null) return fail("no YAML front matter (the file must start with a '---' block)");
  const doc = parseDocument(m[1] as string, { prettyErrors: false });
  if (doc.errors.length > 0)
    return fail(`front matter is not valid YAML: ${doc.errors[0]?.message ?? "parse error"}`);
  const parsed = FrontMatterSchema.safeParse(doc.toJS({ maxAliasCount: 50 }));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.map(String).join(".") : "front matter";
    return fail(`${where}: ${issue?.message ?? "invalid"}`);
  }
  const fm = parsed.data;
  if (fm.name !== dirName)
    return fail(`name "${fm.name}" does not match its directory "${dirName}"`, fm.name);
  const body = content.slice(m[0].length).trim();
  if (body === "") return fail("the body is empty", fm.name);
  return { ok: true, skill: { ...fm, body, source } };
}

export interface LoadSkillsOptions {
  /**
   * The workspace's skill files, paths relative to the workspace root (e.g.
   * ".agent/skills/lint-fix/SKILL.md"). Files outside the two skill roots are ignored, so
   * the worker may pass the result of a broad listing.
   */
  workspaceFiles: readonly { path: string; content: string }[];
  /** The server's skills directory on the host (e.g. the repository's `skills/`). */
  serverDir: string;
}

/** Discovers skills in precedence order; never throws for a broken or missing skill. */
export async function loadSkills(opts: LoadSkillsOptions): Promise<LoadedSkills> {
  const candidates: { dirName: string; file: string; source: string; content: string }[] = [];
  for (const root of WORKSPACE_ROOTS) {
    const files = opts.workspaceFiles
      .map((f) => ({ ...f, path: f.path.replace(/^\.\//, "") }))
      .filter((f) => f.path.startsWith(`${root}/`))
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    for (const f of files) {
      const m = /^([^/]+)\/SKILL\.md$/.exec(f.path.slice(root.length + 1));
      if (m === null) continue; // other files of a skill directory (examples, templates)
      candidates.push({
        dirName: m[1] as string,
        file: f.path,
        source: `workspace:${f.path}`,
        content: f.content,
      });
    }
  }
  const problems: SkillProblem[] = [];
  for (const dirName of await listDirs(opts.serverDir)) {
    const file = join(opts.serverDir, dirName, "SKILL.md");
    try {
      const content = await readFile(file, "utf8");
      candidates.push({ dirName, file, source: `server:${file}`, content });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT")
        problems.push({ name: dirName, file, message: `unreadable (${code})` });
    }
  }

  const byName = new Map<string, Skill>();
  const shadowed: LoadedSkills["shadowed"] = [];
  for (const c of candidates) {
    const r = parseSkill(c.content, c.file, c.dirName, c.source);
    if (!r.ok) {
      problems.push(r.problem);
      continue;
    }
    const earlier = byName.get(r.skill.name);
    if (earlier !== undefined)
      shadowed.push({ name: r.skill.name, file: c.file, by: earlier.source });
    else byName.set(r.skill.name, r.skill);
  }
  const skills = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  return { skills, problems, shadowed };
}

async function listDirs(dir: string): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new AgentdError("EIO", `skills: cannot list ${dir}`, { cause: err });
  }
}

/** CreateRun named skills that no discovered skill has. */
export class UnknownSkillError extends AgentdError {
  readonly names: string[];
  constructor(names: string[]) {
    super("ENOTFOUND", `unknown skill${names.length > 1 ? "s" : ""}: ${names.join(", ")}`, {
      field: "skills",
    });
    this.name = "UnknownSkillError";
    this.names = names;
  }
}

export interface SelectSkillsOptions {
  /** Skills named by CreateRun (run.queued `skills`), in the caller's order. */
  named: readonly string[];
  /** The task prompt, matched against triggers. */
  prompt: string;
  /** Cap on the rendered text (renderSkill) of all selected skills, in bytes. */
  budgetBytes?: number;
  /** How long regex triggers may run. Default DEFAULT_TRIGGER_LIMITS. */
  triggerLimits?: TriggerLimits;
}

export interface SkillSelection {
  /** Named skills in the caller's order, then triggered ones by name. */
  skills: Skill[];
  /** Why each selected skill is in: "named" or "trigger <t>". */
  why: Record<string, string>;
  /** Skills that qualified but were left out: over the budget, or a trigger timed out. */
  dropped: { name: string; reason: string }[];
}

/**
 * Picks the skills of a run. Throws UnknownSkillError (naming every unknown name) when a
 * named skill does not exist. Skills are added in order while the budget allows; one that
 * does not fit is reported in `dropped`, never cut (half a skill is a wrong instruction).
 */
export function selectSkills(all: readonly Skill[], opts: SelectSkillsOptions): SkillSelection {
  const byName = new Map(all.map((s) => [s.name, s]));
  const named = [...new Set(opts.named)];
  const unknown = named.filter((n) => !byName.has(n));
  if (unknown.length > 0) throw new UnknownSkillError(unknown);

  const why: Record<string, string> = {};
  const dropped: SkillSelection["dropped"] = [];
  const wanted: Skill[] = [];
  for (const n of named) {
    wanted.push(byName.get(n) as Skill);
    why[n] = "named";
  }
  const rest = [...all].filter((s) => !(s.name in why)).sort((a, b) => (a.name < b.name ? -1 : 1));
  const matches = matchTriggers(rest, opts.prompt, opts.triggerLimits);
  for (const s of rest) {
    const m = matches.get(s.name);
    if (m?.matched !== undefined) {
      wanted.push(s);
      why[s.name] = `trigger ${m.matched}`;
    } else if (m?.timedOut) dropped.push({ name: s.name, reason: "trigger timed out" });
  }

  const budget = opts.budgetBytes ?? DEFAULT_SKILL_BUDGET_BYTES;
  let used = 0;
  const skills: Skill[] = [];
  for (const s of wanted) {
    const size = Buffer.byteLength(renderSkill(s));
    if (used + size > budget) {
      dropped.push({ name: s.name, reason: `over the skill budget (${size} bytes)` });
      delete why[s.name];
      continue;
    }
    used += size;
    skills.push(s);
  }
  return { skills, why, dropped };
}

/**
 * A trigger of each skill that matches `prompt` (keywords tried first). Keywords match
 * whole words, case-insensitively, whitespace-flexible. Regexes run in a vm context only
 * for its timeout, which interrupts catastrophic backtracking (the vm is no sandbox here:
 * the pattern is data, never code): each regex gets `limits.regexMs`, all of them
 * `limits.totalMs`, the server's (trusted) skills first. A regex that runs out of time
 * counts as no match and is reported.
 */
export function matchTriggers(
  skills: readonly Skill[],
  prompt: string,
  limits: TriggerLimits = DEFAULT_TRIGGER_LIMITS,
): Map<string, { matched?: string; timedOut?: boolean }> {
  const out = new Map<string, { matched?: string; timedOut?: boolean }>();
  const jobs: { name: string; trigger: string; source: string; flags: string; server: boolean }[] =
    [];
  for (const s of skills) {
    for (const t of s.triggers) {
      const re = parseRegexTrigger(t);
      if (re !== undefined)
        jobs.push({ name: s.name, trigger: t, ...re, server: s.source.startsWith("server:") });
      else if (!out.has(s.name) && keywordRegExp(t).test(prompt)) out.set(s.name, { matched: t });
    }
  }
  const pending = jobs
    .filter((j) => !out.has(j.name))
    .sort((a, b) => Number(b.server) - Number(a.server));
  if (pending.length === 0) return out;
  const ctx = vm.createContext({
    text: capUtf8(prompt, TRIGGER_PROMPT_BYTES),
    source: "",
    flags: "",
  });
  const deadline = performance.now() + limits.totalMs;
  for (const j of pending) {
    if (out.get(j.name)?.matched !== undefined) continue;
    const left = Math.floor(deadline - performance.now());
    let matched = false;
    let timedOut = left < 1;
    if (!timedOut) {
      ctx.source = j.source;
      ctx.flags = j.flags;
      try {
        matched =
          TEST_SCRIPT.runInContext(ctx, { timeout: Math.min(limits.regexMs, left) }) === true;
      } catch {
        timedOut = true; // (or an invalid regex that slipped through: no match either way)
      }
    }
    if (matched) out.set(j.name, { matched: j.trigger });
    else if (timedOut) out.set(j.name, { timedOut: true });
  }
  return out;
}

const TEST_SCRIPT = new vm.Script("new RegExp(source, flags).test(text)");

function keywordRegExp(keyword: string): RegExp {
  const words = keyword
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"));
  return new RegExp(`(?<![\\p{L}\\p{N}_])${words.join("\\s+")}(?![\\p{L}\\p{N}_])`, "iu");
}

/** A skill as it appears in the system prompt (the budget measures this text). */
export function renderSkill(s: Skill): string {
  return `## Skill: ${s.name} (v${s.version})\n${s.description}\n\n${s.body}\n`;
}

/** `text` cut to at most `maxBytes` UTF-8 bytes, on a character boundary. */
export function capUtf8(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.byteLength <= maxBytes) return text;
  let end = Math.max(0, maxBytes);
  while (end > 0 && ((buf[end] as number) & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString("utf8");
}

/** The last at most `maxBytes` UTF-8 bytes of `text`, on a character boundary. */
export function tailUtf8(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.byteLength <= maxBytes) return text;
  let start = buf.byteLength - Math.max(0, maxBytes);
  while (start < buf.byteLength && ((buf[start] as number) & 0xc0) === 0x80) start++;
  return buf.subarray(start).toString("utf8");
}
