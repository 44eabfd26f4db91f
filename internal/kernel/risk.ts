/**
 * The risk profile of a proposed call: category, scope, estimated impact, and whether it
 * touches secrets, configuration or build files, plus the policy rules that matched and,
 * for commands, the files whose content decides what runs (checked for provenance by the
 * kernel, see provenance.ts). Pure and fast (no I/O): it runs on every call before anything
 * else. Total: whatever the input, it returns an assessment (a failure is a deny naming the
 * field), never throws.
 */
import { AgentdError } from "../errors.ts";
import { pickCommands, type RunCommands, testCommandLine } from "../tools/command-spec.ts";
import { checkPath } from "../tools/jail.ts";
import { argvLine } from "../tools/run-command.ts";
import { analyzeCommand, type CommandAnalysis } from "./command-analysis.ts";
import { assessCommand, type Draft } from "./command-risk.ts";
import { compilePolicyRegex, type PolicyRegex } from "./policy-regex.ts";
import type { Policy } from "./policy-schema.ts";
import { createPathGuard, type PathGuard } from "./protected-paths.ts";
import { runnerFiles } from "./runner-files.ts";

export type RiskCategory = "read" | "write" | "exec" | "network";
export type Impact = "low" | "medium" | "high";

export interface RiskProfile {
  category: RiskCategory;
  scope: string;
  estimatedImpact: Impact;
  touchesSecrets: boolean;
  touchesConfig: boolean;
  touchesBuild: boolean;
}

/** Everything the decision needs to know about a call. */
export interface Assessment {
  risk: RiskProfile;
  /** Rules that matched, e.g. "risk.highRiskCommands:rm" (shown in previews and events). */
  matched: string[];
  /** Set when an invariant or a policy rule forbids the call outright. */
  deny?: { rule: string; reason: string; field?: string };
  /** Facts that make a risk-governed call wait for approval, as rule names. */
  approvalFacts: string[];
  /** A shell command's analysis (process.run, test.run, lint.run, setup.run). */
  command?: { line: string; cwd: string; analysis: CommandAnalysis };
  /** Lines a patch adds and removes, files it names (repo.patch). */
  patch?: { files: number; added: number; removed: number };
  /**
   * Workspace-relative files whose content decides what the command runs ("s.sh",
   * "Makefile", "package.json"); absent or empty when none. The kernel checks which of them
   * the run wrote or changed and applies applyProvenance() before deciding.
   */
  scripts?: string[];
}

/** Compiled matchers of a policy (built once per policy, reused for every call). */
export interface CompiledRisk {
  /** workspace.denyPatterns */
  denied: PathGuard;
  secret: PathGuard;
  config: PathGuard;
  build: PathGuard;
  denyPatterns: PolicyRegex[];
}

export function compileRisk(policy: Policy): CompiledRisk {
  return {
    denied: createPathGuard(policy.workspace.denyPatterns),
    secret: createPathGuard(policy.risk.secretPaths),
    config: createPathGuard(policy.risk.configPaths),
    build: createPathGuard(policy.risk.buildPaths),
    denyPatterns: policy.risk.denyCommandPatterns.map(compilePolicyRegex),
  };
}

/** Longest command line assessed; longer ones are refused (process.run allows 16 KiB). */
export const MAX_COMMAND_LINE = 64 * 1024;

const IMPACT_RANK: Record<Impact | "never", number> = { low: 0, medium: 1, high: 2, never: 3 };

/** The impactAtLeast fact for `impact` under the policy, if it holds. */
export function impactFact(impact: Impact, policy: Policy): string | undefined {
  const at = policy.risk.approvalWhen.impactAtLeast;
  return IMPACT_RANK[impact] >= IMPACT_RANK[at]
    ? `risk.approvalWhen.impactAtLeast:${at}`
    : undefined;
}

/**
 * Assesses a call of `tool` with `input`. Jail violations (absolute paths, `..`, NUL, deny
 * patterns) come back as `deny` (rule jail or workspace.denyPatterns); input it cannot
 * assess (wrong types, oversize values) as a deny with rule input.schema naming the field;
 * anything else that fails as a deny with rule kernel.decide (the kernel fails closed).
 */
export function assess(
  tool: string,
  input: Record<string, unknown>,
  policy: Policy,
  compiled: CompiledRisk,
  commands: RunCommands = pickCommands(policy.tools, undefined),
): Assessment {
  const draft: Draft = {
    category: "read",
    scope: "workspace",
    impact: "low",
    matched: [],
    facts: [],
    paths: [],
    globs: [],
    namePatterns: [],
  };
  try {
    const denied = assessTool(tool, input ?? {}, policy, compiled, draft, commands);
    return denied ?? finish(draft, input ?? {}, policy, compiled);
  } catch (err) {
    if (err instanceof AgentdError && err.code === "EPERMISSION") {
      return deny(
        draft,
        err.message,
        /deny pattern/.test(err.message) ? "workspace.denyPatterns" : "jail",
      );
    }
    if (err instanceof AgentdError && err.code === "EVALIDATION")
      return deny(draft, err.message, "input.schema", err.field ?? "input");
    // Not the input's fault: the kernel could not decide, so it refuses (fails closed).
    return deny(
      draft,
      `${tool}: the call could not be assessed (${describe(err)})`,
      "kernel.decide",
    );
  }
}

function describe(err: unknown): string {
  try {
    return err instanceof Error ? err.message.slice(0, 200) : "unknown error";
  } catch {
    return "unknown error";
  }
}

/** The tool-specific part; a deny, or undefined when the draft is complete. */
function assessTool(
  tool: string,
  input: Record<string, unknown>,
  policy: Policy,
  compiled: CompiledRisk,
  d: Draft,
  commands: RunCommands,
): Assessment | undefined {
  switch (tool) {
    case "repo.read":
    case "repo.patch": {
      const rel = checkPath("path", stringField(input, "path"), policy.workspace.denyPatterns);
      d.paths.push(rel);
      d.scope = rel;
      if (tool === "repo.read") return undefined;
      d.category = "write";
      d.patch = patchStats(input);
      if (d.patch.files > 1) {
        return deny(
          d,
          `repo.patch changes one file per call; this diff changes ${d.patch.files} files`,
          "capabilities.repo.patch.oneFile",
        );
      }
      const lines = d.patch.added + d.patch.removed;
      const { highLines, mediumLines } = policy.risk.impact;
      d.impact = lines >= highLines ? "high" : lines >= mediumLines ? "medium" : "low";
      return undefined;
    }
    case "repo.search": {
      const globs = input.globs;
      d.scope =
        Array.isArray(globs) && globs.length > 0
          ? globs.map((g) => String(g)).join(",")
          : "workspace";
      return undefined;
    }
    case "process.run":
    case "test.run":
    case "lint.run":
    case "setup.run": {
      const line = commandLine(tool, input, commands);
      const cwd =
        input.cwd === undefined
          ? "."
          : checkPath("cwd", stringField(input, "cwd"), policy.workspace.denyPatterns, true) || ".";
      const refused = assessCommand(d, line, cwd, policy, compiled);
      if (refused !== undefined) return deny(d, refused.reason, refused.rule);
      // The runner's configuration decides what these run as much as their line does.
      if (tool !== "process.run")
        d.scripts = [
          ...new Set([
            ...(d.scripts ?? []),
            ...runnerFiles(cwd),
            ...scriptRuns(line, commands, cwd),
          ]),
        ];
      return undefined;
    }
    default:
      return deny(d, `unknown tool ${JSON.stringify(String(tool)).slice(0, 100)}`, "capabilities");
  }
}

/**
 * The files the runner's own script runs (package.json `"lint": "node tools/lint.mjs"`):
 * what the run wrote there runs as the runner, so provenance judges them too.
 */
function scriptRuns(line: string, commands: RunCommands | undefined, cwd: string): string[] {
  const dir = cwd.replace(/^(\.\/)+|\/+$/g, "");
  const scripts = commands?.npmScripts;
  if (scripts === undefined || (dir !== "" && dir !== ".")) return [];
  const out: string[] = [];
  for (const c of analyzeCommand(line).commands) {
    const name = npmScriptName(c.name, c.args);
    const body = name === undefined ? undefined : scripts[name];
    if (body !== undefined) out.push(...analyzeCommand(body).scripts);
  }
  return out;
}

/** The package.json script an npm, yarn or pnpm command runs (`npm run lint` → lint). */
function npmScriptName(tool: string, args: readonly string[]): string | undefined {
  if (tool !== "npm" && tool !== "yarn" && tool !== "pnpm") return undefined;
  const [sub, arg] = args.filter((a) => !a.startsWith("-"));
  if (sub === "test" || sub === "t" || sub === "tst") return "test";
  if (sub === "run" || sub === "run-script") return arg;
  return tool === "npm" ? undefined : sub;
}

/**
 * The line the tool runs: process.run's command; test.run's and lint.run's from the policy
 * or the workspace (command-spec.ts), built as the tool builds it.
 */
function commandLine(tool: string, input: Record<string, unknown>, commands: RunCommands): string {
  if (tool === "process.run")
    return Array.isArray(input.argv)
      ? limited(argvLine(input.argv.map(String)), "argv")
      : limited(stringField(input, "command"), "command");
  if (tool === "lint.run") return limited(commands.lint?.command ?? "", "tools.lint");
  if (tool === "setup.run") return limited(commands.setup?.command ?? "", "tools.setup");
  const spec = commands.test ?? { command: "", source: "" };
  limited(spec.named ?? spec.command, "tools.test");
  const name = input.name === undefined ? undefined : limited(stringField(input, "name"), "name");
  return testCommandLine(spec, name);
}

function stringField(input: Record<string, unknown>, field: string): string {
  const v = input[field];
  if (typeof v !== "string")
    throw new AgentdError("EVALIDATION", `${field}: must be a string`, { field });
  return v;
}

function limited(value: string, field: string): string {
  if (value.length > MAX_COMMAND_LINE)
    throw new AgentdError(
      "EVALIDATION",
      `${field}: is longer than ${MAX_COMMAND_LINE} characters`,
      { field },
    );
  return value;
}

/** Path facts, approval facts and the final profile of a draft without a deny. */
function finish(
  d: Draft,
  input: Record<string, unknown>,
  policy: Policy,
  c: CompiledRisk,
): Assessment {
  // A glob counts as touching every path it could match, whether or not that file exists
  // yet (`cp p.txt packag?.json` creates package.json): literal paths, shell globs and the
  // patterns a program matches itself (find -name) go through the same guards.
  const some = (g: PathGuard): boolean =>
    d.paths.some((p) => g.literal(p) !== undefined) ||
    d.globs.some((p) => g.glob(p) !== undefined) ||
    d.namePatterns.some((p) => g.glob(p, true) !== undefined);
  const touchesSecrets = some(c.secret) || JSON.stringify(input).includes("$ENV.");
  const touchesConfig = some(c.config);
  const touchesBuild = some(c.build);
  const when = policy.risk.approvalWhen;
  if (touchesSecrets) {
    d.matched.push("risk.secretPaths");
    if (when.touchesSecrets) d.facts.push("risk.approvalWhen.touchesSecrets");
  }
  if (touchesConfig) {
    d.matched.push("risk.configPaths");
    if (when.touchesConfig) d.facts.push("risk.approvalWhen.touchesConfig");
  }
  if (touchesBuild) {
    d.matched.push("risk.buildPaths");
    if (when.touchesBuild) d.facts.push("risk.approvalWhen.touchesBuild");
  }
  const fact = impactFact(d.impact, policy);
  if (fact !== undefined) d.facts.push(fact);
  const approvalFacts = [...new Set(d.facts)].filter(
    (f) =>
      (f !== "risk.approvalWhen.highRiskCommand" || when.highRiskCommand) &&
      (f !== "risk.approvalWhen.dynamicShell" || when.dynamicShell),
  );
  return {
    risk: {
      category: d.category,
      scope: d.scope,
      estimatedImpact: d.impact,
      touchesSecrets,
      touchesConfig,
      touchesBuild,
    },
    matched: [...new Set(d.matched)],
    approvalFacts,
    ...(d.command === undefined ? {} : { command: d.command }),
    ...(d.patch === undefined ? {} : { patch: d.patch }),
    ...(d.scripts === undefined || d.scripts.length === 0 ? {} : { scripts: d.scripts }),
  };
}

function deny(d: Draft, reason: string, rule: string, field?: string): Assessment {
  return {
    risk: {
      category: d.category,
      scope: d.scope,
      estimatedImpact: "high",
      touchesSecrets: false,
      touchesConfig: false,
      touchesBuild: false,
    },
    matched: [...d.matched, rule],
    deny: { rule, reason, ...(field === undefined ? {} : { field }) },
    approvalFacts: [],
  };
}

/** Lines added and removed and files named by a repo.patch input, counted from the text. */
export function patchStats(input: Record<string, unknown>): {
  files: number;
  added: number;
  removed: number;
} {
  if (typeof input.unifiedDiff === "string") {
    let files = 0;
    let added = 0;
    let removed = 0;
    for (const line of input.unifiedDiff.split("\n")) {
      if (line.startsWith("+++ ")) files++;
      else if (line.startsWith("--- ")) continue;
      else if (line.startsWith("+")) added++;
      else if (line.startsWith("-")) removed++;
    }
    return { files: Math.max(files, 1), added, removed };
  }
  let added = 0;
  let removed = 0;
  const edits = input.edits === undefined ? [] : input.edits;
  if (!Array.isArray(edits))
    throw new AgentdError("EVALIDATION", "edits: must be a list", { field: "edits" });
  for (const e of edits as { oldText: unknown; newText: unknown }[]) {
    if (typeof e?.oldText !== "string" || typeof e.newText !== "string")
      throw new AgentdError("EVALIDATION", "edits: each edit needs oldText and newText strings", {
        field: "edits",
      });
    removed += e.oldText === "" ? 0 : e.oldText.split("\n").length;
    added += e.newText === "" ? 0 : e.newText.split("\n").length;
  }
  return { files: 1, added, removed };
}
