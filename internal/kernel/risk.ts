/**
 * The risk profile of a proposed call: category, scope, estimated impact, and whether it
 * touches secrets, configuration or build files, plus the policy rules that matched. Pure
 * and fast (no I/O): it runs on every call before anything else.
 */
import picomatch from "picomatch";
import { AgentdError } from "../errors.ts";
import { checkPath } from "../tools/jail.ts";
import { analyzeCommand, type CommandAnalysis, commandMatches } from "./command-analysis.ts";
import type { Policy } from "./policy-schema.ts";

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
  deny?: { rule: string; reason: string };
  /** Facts that make a risk-governed call wait for approval, as rule names. */
  approvalFacts: string[];
  /** A shell command's analysis (process.run, test.run, lint.run). */
  command?: { line: string; cwd: string; analysis: CommandAnalysis };
  /** Lines a patch adds and removes, files it names (repo.patch). */
  patch?: { files: number; added: number; removed: number };
}

const NETWORK_COMMANDS = [
  "curl",
  "wget",
  "nc",
  "ncat",
  "netcat",
  "ssh",
  "scp",
  "sftp",
  "rsync",
  "ftp",
  "telnet",
  "git clone",
  "git fetch",
  "git pull",
  "git push",
  "npm install",
  "npm publish",
  "pip install",
  "apt-get",
  "apt",
];

/** Compiled matchers of a policy (built once per policy, reused for every call). */
export interface CompiledRisk {
  secret: (p: string) => boolean;
  config: (p: string) => boolean;
  build: (p: string) => boolean;
  denyPatterns: RegExp[];
}

export function compileRisk(policy: Policy): CompiledRisk {
  const m = (globs: string[]) =>
    globs.length === 0 ? () => false : picomatch(globs, { dot: true });
  return {
    secret: m(policy.risk.secretPaths),
    config: m(policy.risk.configPaths),
    build: m(policy.risk.buildPaths),
    denyPatterns: policy.risk.denyCommandPatterns.map((r) => new RegExp(r)),
  };
}

const IMPACT_RANK: Record<Impact | "never", number> = { low: 0, medium: 1, high: 2, never: 3 };

/**
 * Assesses a validated call of `tool` with `input`. Jail violations (absolute paths, `..`,
 * NUL, deny patterns) come back as `deny`, never as a thrown error.
 */
export function assess(
  tool: string,
  input: Record<string, unknown>,
  policy: Policy,
  compiled: CompiledRisk,
): Assessment {
  const matched: string[] = [];
  const facts: string[] = [];
  const paths: string[] = [];
  let category: RiskCategory = "read";
  let scope = "workspace";
  let impact: Impact = "low";
  let command: Assessment["command"];
  let patch: Assessment["patch"];

  try {
    switch (tool) {
      case "repo.read":
      case "repo.patch": {
        const rel = checkPath("path", String(input.path), policy.workspace.denyPatterns);
        paths.push(rel);
        scope = rel;
        if (tool === "repo.patch") {
          category = "write";
          patch = patchStats(input);
          if (patch.files > 1) {
            return deny(
              `repo.patch changes one file per call; this diff changes ${patch.files} files`,
              "capabilities.repo.patch.oneFile",
            );
          }
          const lines = patch.added + patch.removed;
          impact =
            lines >= policy.risk.impact.highLines
              ? "high"
              : lines >= policy.risk.impact.mediumLines
                ? "medium"
                : "low";
        }
        break;
      }
      case "repo.search":
        scope =
          Array.isArray(input.globs) && input.globs.length > 0
            ? (input.globs as string[]).join(",")
            : "workspace";
        break;
      case "process.run":
      case "test.run":
      case "lint.run": {
        category = "exec";
        const line =
          tool === "process.run"
            ? String(input.command)
            : tool === "test.run"
              ? (policy.tools.test ?? "")
              : (policy.tools.lint ?? "");
        const cwd =
          typeof input.cwd === "string" ? checkPath("cwd", input.cwd, [], true) || "." : ".";
        scope = cwd;
        const analysis = analyzeCommand(line);
        command = { line, cwd, analysis };
        for (const d of policy.risk.denyCommands) {
          if (commandMatches(analysis.commands, d))
            return deny(`the command runs ${d}, which policy forbids`, `risk.denyCommands:${d}`);
        }
        for (const [i, re] of compiled.denyPatterns.entries()) {
          if (re.test(line))
            return deny(
              `the command line matches a forbidden pattern (${policy.risk.denyCommandPatterns[i]})`,
              `risk.denyCommandPatterns:${i}`,
            );
        }
        for (const h of policy.risk.highRiskCommands) {
          if (commandMatches(analysis.commands, h)) {
            matched.push(`risk.highRiskCommands:${h}`);
            facts.push("risk.approvalWhen.highRiskCommand");
            impact = "high";
          }
        }
        if (NETWORK_COMMANDS.some((n) => commandMatches(analysis.commands, n)))
          category = "network";
        if (analysis.dynamic.length > 0) {
          matched.push(...analysis.dynamic.map((d) => `dynamic:${d}`));
          facts.push("risk.approvalWhen.dynamicShell");
          if (impact === "low") impact = "medium";
        }
        if (analysis.writes.length > 0 && impact === "low") impact = "medium";
        // Words that look like paths: check them like a tool's path argument would be.
        for (const w of [...analysis.words, ...analysis.writes]) {
          const p = w.replace(/^\.\//, "");
          if (p !== "" && !p.startsWith("-") && /[./]/.test(p)) paths.push(p);
        }
        if (
          paths.some((p) =>
            policy.workspace.denyPatterns.some((g) => picomatch.isMatch(p, g, { dot: true })),
          )
        ) {
          // git itself reads .git: a command may mention a denied path, but a person decides.
          matched.push("workspace.denyPatterns:mentioned-by-command");
          facts.push("workspace.denyPatterns:mentioned-by-command");
        }
        break;
      }
      default:
        return deny(`unknown tool ${JSON.stringify(tool)}`, "capabilities");
    }
  } catch (err) {
    if (err instanceof AgentdError && err.code === "EPERMISSION") {
      const rule = /deny pattern/.test(err.message) ? "workspace.denyPatterns" : "jail";
      return deny(err.message, rule);
    }
    throw err;
  }

  const touchesSecrets = paths.some(compiled.secret) || JSON.stringify(input).includes("$ENV.");
  const touchesConfig = paths.some(compiled.config);
  const touchesBuild = paths.some(compiled.build);
  const when = policy.risk.approvalWhen;
  if (touchesSecrets) {
    matched.push("risk.secretPaths");
    if (when.touchesSecrets) facts.push("risk.approvalWhen.touchesSecrets");
  }
  if (touchesConfig) {
    matched.push("risk.configPaths");
    if (when.touchesConfig) facts.push("risk.approvalWhen.touchesConfig");
  }
  if (touchesBuild) {
    matched.push("risk.buildPaths");
    if (when.touchesBuild) facts.push("risk.approvalWhen.touchesBuild");
  }
  if (IMPACT_RANK[impact] >= IMPACT_RANK[when.impactAtLeast])
    facts.push(`risk.approvalWhen.impactAtLeast:${when.impactAtLeast}`);
  const approvalFacts = [...new Set(facts)].filter(
    (f) =>
      (f !== "risk.approvalWhen.highRiskCommand" || when.highRiskCommand) &&
      (f !== "risk.approvalWhen.dynamicShell" || when.dynamicShell),
  );
  return {
    risk: { category, scope, estimatedImpact: impact, touchesSecrets, touchesConfig, touchesBuild },
    matched,
    approvalFacts,
    ...(command === undefined ? {} : { command }),
    ...(patch === undefined ? {} : { patch }),
  };

  function deny(reason: string, rule: string): Assessment {
    return {
      risk: {
        category,
        scope,
        estimatedImpact: "high",
        touchesSecrets: false,
        touchesConfig: false,
        touchesBuild: false,
      },
      matched: [...matched, rule],
      deny: { rule, reason },
      approvalFacts: [],
    };
  }
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
  for (const e of (input.edits as { oldText: string; newText: string }[] | undefined) ?? []) {
    removed += e.oldText === "" ? 0 : e.oldText.split("\n").length;
    added += e.newText === "" ? 0 : e.newText.split("\n").length;
  }
  return { files: 1, added, removed };
}
