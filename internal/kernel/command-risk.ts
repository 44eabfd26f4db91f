/**
 * The risk of a shell command line under a policy: denied commands and patterns, high-risk
 * and destructive commands, network use, dynamic constructs, and the paths (literal or
 * glob) it may reach. Fills the draft assessment risk.ts finishes. Where the analysis cannot
 * tell what a command does, the call is high risk, never safe. Pure.
 */
import { analyzeCommand, type CommandAnalysis, commandMatches } from "./command-analysis.ts";
import type { Policy } from "./policy-schema.ts";
import type { CompiledRisk, Impact, RiskCategory } from "./risk.ts";

/** An assessment being built. */
export interface Draft {
  category: RiskCategory;
  scope: string;
  impact: Impact;
  matched: string[];
  facts: string[];
  /** Candidate paths as written (tails are tried by the guards). */
  paths: string[];
  /** Shell globs among a command's arguments. */
  globs: string[];
  /** File-name patterns a program matches itself (find -name): wildcards match dotfiles. */
  namePatterns: string[];
  command?: { line: string; cwd: string; analysis: CommandAnalysis };
  patch?: { files: number; added: number; removed: number };
  scripts?: string[];
}

const NETWORK_COMMANDS = [
  "curl",
  "wget",
  "nc",
  "ncat",
  "netcat",
  "socat",
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
  "git ls-remote",
  "npm install",
  "npm publish",
  "pip install",
  "apt-get",
  "apt",
];

/** Globs longer than this are not compared with the protected paths: dynamic. */
const MAX_GLOB = 1024;
const HIGH_RISK = "risk.approvalWhen.highRiskCommand";
const DYNAMIC = "risk.approvalWhen.dynamicShell";
const MENTIONED = "workspace.denyPatterns:mentioned-by-command";

/** Fills `d` for the command `line` run in `cwd`; a refusal when policy forbids it. */
export function assessCommand(
  d: Draft,
  line: string,
  cwd: string,
  policy: Policy,
  compiled: CompiledRisk,
): { rule: string; reason: string } | undefined {
  d.category = "exec";
  d.scope = cwd;
  const analysis = analyzeCommand(line, { cwd });
  d.command = { line, cwd, analysis };
  for (const c of policy.risk.denyCommands) {
    if (commandMatches(analysis.commands, c))
      return {
        reason: `the command runs ${c}, which policy forbids`,
        rule: `risk.denyCommands:${c}`,
      };
  }
  for (const [i, re] of compiled.denyPatterns.entries()) {
    if (re.test(line))
      return {
        reason: `the command line matches a forbidden pattern (${policy.risk.denyCommandPatterns[i]})`,
        rule: `risk.denyCommandPatterns:${i}`,
      };
  }
  for (const h of policy.risk.highRiskCommands) {
    if (!commandMatches(analysis.commands, h)) continue;
    d.matched.push(`risk.highRiskCommands:${h}`);
    d.facts.push(HIGH_RISK);
    d.impact = "high";
  }
  for (const x of analysis.destructive) {
    d.matched.push(`destructive:${x}`);
    d.facts.push(HIGH_RISK);
    d.impact = "high";
  }
  if (NETWORK_COMMANDS.some((n) => commandMatches(analysis.commands, n))) d.category = "network";
  const dynamic = [...analysis.dynamic];
  for (const g of analysis.globs) {
    if (g.length > MAX_GLOB) dynamic.push("a glob too long to check");
    else d.globs.push(g);
  }
  if (dynamic.length > 0) {
    d.matched.push(...dynamic.map((x) => `dynamic:${x.slice(0, 120)}`));
    d.facts.push(DYNAMIC);
    if (d.impact === "low") d.impact = "medium";
  }
  if (analysis.writes.length > 0 && d.impact === "low") d.impact = "medium";
  for (const p of analysis.paths) d.paths.push(...pathForms(p));
  for (const p of analysis.namePatterns) {
    if (p.length > MAX_GLOB) dynamic.push("a pattern too long to check");
    else d.namePatterns.push(p);
  }
  mentions(d, compiled);
  d.scripts = analysis.scripts;
  return undefined;
}

/** The forms of an argument that may be a path: itself, an option's value, an @file. */
function pathForms(word: string): string[] {
  const out: string[] = [];
  const eq = word.indexOf("=");
  if (!word.startsWith("-")) out.push(word);
  if (eq >= 0) out.push(word.slice(eq + 1));
  else if (/^-[A-Za-z]./.test(word)) out.push(word.slice(2));
  // REV:path (git show HEAD:.env), host:path.
  const colon = word.lastIndexOf(":");
  if (colon >= 0) out.push(word.slice(colon + 1));
  return out.flatMap((p) => (p.startsWith("@") ? [p, p.slice(1)] : [p])).filter((p) => p !== "");
}

/** A command may mention a deny-pattern path (git itself reads .git): a person decides. */
function mentions(d: Draft, compiled: CompiledRisk): void {
  const literal = d.paths.find((p) => compiled.denied.literal(p) !== undefined);
  const glob =
    d.globs.some((g) => compiled.denied.glob(g) !== undefined) ||
    d.namePatterns.some((g) => compiled.denied.glob(g, true) !== undefined);
  if (literal === undefined && !glob) return;
  d.matched.push(MENTIONED);
  d.facts.push(MENTIONED);
}
