/**
 * Emptying and replacing that only the container can tell: `cp e f` empties f when e is an
 * empty file (made by an earlier call's `touch e`, or by an earlier command of the same line,
 * which counts as empty whatever it holds now: `: > e; cp e f`) and f is not, `cat a b > f`
 * when a and b are empty (or missing), `sort -o f a`, `uniq a f` when a is, `awk '…' > f`
 * (output the line does not show) when f is a non-empty file of the uploaded workspace,
 * and `mv x f` replaces f when f is an existing non-empty file (it is `cp x f && rm x`, and
 * rm asks). The analysis lists the copy groups and moves (CommandAnalysis.copySources,
 * .moves); one exec in the run's container answers for all of them (probeReplacing), and
 * applyReplacing() — pure — makes the call destructive (highRiskCommand) as truncate is.
 *
 * Fails closed: a path that cannot be named on a line, or a probe that fails, times out or
 * answers out of step, counts as emptying and replacing. Must never: run anything of the
 * workspace, or write anything.
 */
import type { SandboxHandle } from "../sandbox/port.ts";
import type { CommandAnalysis, CopyGroup } from "./command-analysis.ts";
import type { Policy } from "./policy-schema.ts";
import { type Assessment, impactFact } from "./risk.ts";

/** What the container said: reasons, as `destructive:` rule texts. */
export interface ReplacingFound {
  reasons: string[];
}

/** Queries a probe answers at most (a longer list is answered as "all of them": fail closed). */
const MAX_QUERIES = 512;

/**
 * Per query, one line. `e PATH`: null (it resolves to /dev/null), device (another
 * character device: /dev/zero, /dev/stdin…), empty (a regular file of 0 bytes), full, or
 * absent. `m SRC TARGET`: replaces (TARGET, or TARGET/SRC's name when TARGET is a
 * directory, is a non-empty regular file) or new. `d TARGET`: replaces when TARGET is a
 * non-empty file, or a directory holding one (sources named by a pattern: their names are
 * not known). `r SRC TARGET`: replaces when SRC is a directory holding an empty file and
 * TARGET a directory (a recursive copy). Relative paths are read from /workspace. A copy
 * group asks `e` for each source and `m` (or `d`) for its target; a move asks `m`.
 */
const PROBE_SCRIPT = `cd /workspace 2>/dev/null || exit 3
while [ $# -gt 0 ]; do
  k=$1; shift
  case $k in
  e) p=$1; shift
     if [ -c "$p" ] && [ "$(readlink -f -- "$p")" = /dev/null ]; then echo null
     elif [ -c "$p" ]; then echo device
     elif [ -f "$p" ] && [ ! -s "$p" ]; then echo empty
     elif [ -e "$p" ]; then echo full; else echo absent; fi;;
  m) s=$1; t=$2; shift 2
     if [ -d "$t" ]; then t="$t/\${s##*/}"; fi
     if [ -f "$t" ] && [ -s "$t" ]; then echo replaces; else echo new; fi;;
  d) t=$1; shift
     case $t in /*) ;; *) t=./$t ;; esac
     if [ -d "$t" ]; then
       f=$(find "$t/" -maxdepth 1 -type f -size +0 2>/dev/null | head -n 1) || f=x
       if [ -n "$f" ]; then echo replaces; else echo new; fi
     elif [ -f "$t" ] && [ -s "$t" ]; then echo replaces; else echo new; fi;;
  r) s=$1; t=$2; shift 2
     case $s in /*) ;; *) s=./$s ;; esac
     case $t in /*) ;; *) t=./$t ;; esac
     if [ -d "$s" ] && [ -d "$t" ]; then
       f=$(find "$s/" \\( -type f -empty -o -type l -o -type c \\) 2>/dev/null | head -n 1) || f=x
       if [ -n "$f" ]; then echo replaces; else echo new; fi
     else echo new; fi;;
  *) exit 4;;
  esac
done`;

/** True when the analysis lists something only the container can judge. */
export function needsReplacingProbe(analysis: CommandAnalysis | undefined): boolean {
  return (
    analysis !== undefined &&
    (analysis.copySources.length > 0 || analysis.moves.length > 0 || analysis.replaced.length > 0)
  );
}

/**
 * Asks the container which copy groups are all empty, which moves replace a file and which
 * redirections of unseen output replace a non-empty file. `uploaded`: whether a
 * workspace-relative path was in the uploaded workspace (a redirection onto a file the run
 * made itself replaces only the run's own output); undefined counts every file as uploaded.
 */
export async function probeReplacing(
  sandbox: SandboxHandle,
  analysis: CommandAnalysis,
  timeoutMs = 10_000,
  uploaded?: (path: string) => boolean,
): Promise<ReplacingFound> {
  const groups = analysis.copySources;
  const moves = analysis.moves;
  const replaced = analysis.replaced.filter((r) => uploaded === undefined || uploaded(r.to));
  const all = (): ReplacingFound => ({
    reasons: [
      ...groups.map((g) => emptyReason(g.from, g.to)),
      ...moves.map(([s, t]) => moveReason(s, t)),
      ...replaced.map((r) => unseenReason(r.program, r.to)),
    ],
  });
  const paths = [
    ...groups.flatMap((g) => [...g.from, g.to]),
    ...moves.flat(),
    ...replaced.map((r) => r.to),
  ];
  const queries = groups.reduce((n, g) => n + groupQueries(g).length, 0);
  const total = queries + moves.length + replaced.length;
  if (total > MAX_QUERIES || paths.some((p) => p === "" || /[\n\r\0]/.test(p))) return all();
  const argv = [
    ...groups.flatMap((g) => groupQueries(g).flat()),
    ...moves.flatMap(([s, t]) => ["m", s, t]),
    ...replaced.flatMap((r) => ["e", r.to]),
  ];
  let lines: string[];
  try {
    const r = await sandbox.exec({
      argv: ["sh", "-c", PROBE_SCRIPT, "agentd-probe", ...argv],
      timeoutMs,
      maxOutputBytes: 64 * 1024,
    });
    if (r.exitCode !== 0 || r.truncated || r.timedOut) throw new Error("probe failed");
    lines = r.stdout.split("\n").filter((l) => l !== "");
    if (lines.length !== total) throw new Error("probe answered out of step");
  } catch {
    return all();
  }
  const reasons: string[] = [];
  let k = 0;
  for (const g of groups) {
    const answers = lines.slice(k, k + groupQueries(g).length);
    k += answers.length;
    const reason = groupReason(g, answers);
    if (reason !== undefined) reasons.push(reason);
  }
  for (const [s, t] of moves) if (lines[k++] === "replaces") reasons.push(moveReason(s, t));
  for (const r of replaced) if (lines[k++] === "full") reasons.push(unseenReason(r.program, r.to));
  return { reasons };
}

/**
 * The probe's queries for one copy group: `e` for each source, then the target: `m` (the
 * target, or TARGET/NAME for a directory), `d` for pattern sources (whose names are not
 * known: any non-empty file of a directory target counts), none when the target is unknown
 * (counted replaced); a recursive copy adds `r` for its tree.
 */
function groupQueries(g: CopyGroup): string[][] {
  const sources = g.from.map((p) => ["e", p]);
  const target = g.unknownTarget
    ? []
    : g.patterned
      ? [["d", g.to]]
      : [["m", g.from[0] ?? "", g.to]];
  const tree = g.tree ? [["r", g.from[0] ?? "", g.to]] : [];
  return [...sources, ...target, ...tree];
}

/** Why the group empties or replaces a file, from its answers (in groupQueries' order). */
function groupReason(g: CopyGroup, answers: readonly string[]): string | undefined {
  // cp of a missing file fails and leaves the target, `cat missing > f` has emptied f; cp
  // of any device destroys the target (nothing, or zeros without end), while a reader
  // takes a finite part of one (`head -c 1M /dev/zero`).
  // A source an earlier command of the line writes (or a pattern names) is unknown now:
  // it counts as empty.
  const made = new Set(g.made ?? []);
  const empty = (a: string | undefined, i: number): boolean =>
    made.has(g.from[i] ?? "") ||
    a === "empty" ||
    a === "null" ||
    (g.missingEmpties ? a === "absent" : a === "device");
  const n = g.from.length;
  const target = g.unknownTarget ? "replaces" : answers[n];
  if (target === "replaces" && answers.slice(0, n).every(empty)) return emptyReason(g.from, g.to);
  // A tree copied through a path the line made a link or a rename of: nothing is known of it.
  if (g.tree && (g.unknownTarget || answers.at(-1) === "replaces"))
    return treeReason(g.from[0] ?? "", g.to);
  return undefined;
}

function treeReason(source: string, target: string): string {
  return `copies the tree ${source.slice(0, 80)}, which holds empty files or links, into ${target.slice(0, 80)} (may empty files there)`;
}

function unseenReason(program: string, target: string): string {
  return `${program} … > ${target.slice(0, 80)} (replaces an uploaded file with output the line does not show)`;
}

function emptyReason(group: readonly string[], target: string): string {
  const names = group.map((p) => p.slice(0, 80)).join(" ");
  const be = group.length > 1 ? "are" : "is";
  return `copies ${names}, which ${be} empty, onto ${target.slice(0, 80)} (empties it)`;
}

function moveReason(source: string, target: string): string {
  return `mv ${source.slice(0, 80)} onto ${target.slice(0, 80)} (replaces an existing file)`;
}

/**
 * The assessment once the container has answered: each reason becomes a matched rule
 * `destructive:REASON`, the highRiskCommand fact (when the policy enables it) and high
 * impact. A denied assessment, or no reason, is returned as is. Never mutates `a`.
 */
export function applyReplacing(a: Assessment, found: ReplacingFound, policy: Policy): Assessment {
  if (a.deny !== undefined || found.reasons.length === 0) return a;
  const facts = [...a.approvalFacts];
  if (policy.risk.approvalWhen.highRiskCommand) facts.push("risk.approvalWhen.highRiskCommand");
  const impact = impactFact("high", policy);
  if (impact !== undefined) facts.push(impact);
  return {
    ...a,
    risk: { ...a.risk, estimatedImpact: "high" },
    matched: [...new Set([...a.matched, ...found.reasons.map((r) => `destructive:${r}`)])],
    approvalFacts: [...new Set(facts)],
  };
}
