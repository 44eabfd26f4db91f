/**
 * Provenance of the files a command runs. assess() lists, in `assessment.scripts`, the
 * workspace files whose content decides what a command runs (`sh s.sh` → s.sh, `make` →
 * Makefile, `npm test` → package.json). Such a file is trusted as part of the repository
 * when it is as uploaded; when the run itself wrote or changed it (`echo … | base64 -d >
 * s.sh` in one call, `sh s.sh` in the next), the call is high risk and needs a person. The
 * kernel finds which of the files differ from the uploaded workspace (an I/O step) and hands
 * them to applyProvenance(), which is pure.
 */
import type { Policy } from "./policy-schema.ts";
import { type Assessment, impactFact } from "./risk.ts";

/** Run-written entries of the runner trees a decision names one by one. */
const MAX_TREE_SHOWN = 20;

/** The approval fact of a command that runs a file the run wrote or changed. */
export const RUN_WRITTEN_SCRIPT = "risk.approvalWhen.runWrittenScript";

/**
 * The assessment once the kernel knows which of `a.scripts` the run wrote or changed
 * (`changedByRun`: workspace-relative paths, normalised like `a.scripts`; a file that is
 * new, modified, deleted, or whose symlink target changed counts). Each such script adds a
 * matched rule `provenance:run-written:PATH`, the fact risk.approvalWhen.runWrittenScript
 * (when the policy enables it) and makes the impact high. A denied assessment, or one
 * whose scripts are all unchanged, is returned as is. `treeWritten`: entries of the runner
 * trees (runner-trees.ts) a call other than a runner wrote; each counts as such a script.
 * Never mutates `a`.
 */
export function applyProvenance(
  a: Assessment,
  changedByRun: ReadonlySet<string>,
  policy: Policy,
  treeWritten: readonly string[] = [],
): Assessment {
  if (a.deny !== undefined) return a;
  const listed = (a.scripts ?? []).filter((s) => changedByRun.has(s));
  // Runner trees (runner-trees.ts) can hold thousands of entries: the first few are named.
  const shown = treeWritten.slice(0, MAX_TREE_SHOWN);
  if (treeWritten.length > shown.length)
    shown.push(`(and ${treeWritten.length - shown.length} more in the runner trees)`);
  const written = [...new Set([...listed, ...shown])];
  if (written.length === 0) return a;
  const facts = [...a.approvalFacts];
  if (policy.risk.approvalWhen.runWrittenScript) facts.push(RUN_WRITTEN_SCRIPT);
  const impact = impactFact("high", policy);
  if (impact !== undefined) facts.push(impact);
  return {
    ...a,
    risk: { ...a.risk, estimatedImpact: "high" },
    matched: [...a.matched, ...written.map((s) => `provenance:run-written:${s}`)],
    approvalFacts: [...new Set(facts)],
  };
}
