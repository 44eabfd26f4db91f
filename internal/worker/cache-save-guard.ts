/**
 * Whether a setup's state may go to the tenant's shared dependency cache (drive-setup.ts)
 * given the run's secret taint (kernel/secret-taint.ts): never while the run holds a
 * secret anywhere. A held path at, under or above a tree the save archives (/cache, npm's
 * /workspace/node_modules) would carry its bytes to every later run of the tenant; one
 * elsewhere (/tmp), or the container's kernel state, means a call that carried a secret
 * ran, and what it left can reach the saved trees in ways no path check follows (a
 * program it started, a file it wrote that a later step copied). Today the only save
 * follows the run's first setup, before any call could carry a secret (setup.run resolves
 * no placeholder, and a run holding a taint asks a person for it, after which nothing is
 * saved): this is the last fence, not the first.
 *
 * Must never: answer "may save" while the taint holds any entry.
 */
import { CONTAINER_STATE, type TaintedFile } from "../kernel/secret-taint.ts";

/** Why the setup's state may not be saved for other runs, or undefined when it may. */
export function cacheSaveRefusal(
  taint: ReadonlyMap<string, TaintedFile> | undefined,
  roots: readonly string[],
): string | undefined {
  if (taint === undefined || taint.size === 0) return undefined;
  const overlaps = (p: string, root: string) =>
    p === root || p.startsWith(`${root}/`) || root.startsWith(`${p}/`);
  for (const p of taint.keys())
    for (const root of roots)
      if (overlaps(p, root))
        return `the run holds a secret in ${p}, which the cache of ${root} would carry`;
  if (taint.has(CONTAINER_STATE)) return "an exec that carried a secret ran in this container";
  return `the run holds a secret in ${[...taint.keys()][0]}`;
}
