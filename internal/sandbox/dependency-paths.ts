/**
 * Where a setup step installs dependencies inside the workspace (issue #24): `node_modules`
 * folders, at any depth. A path there that the uploaded workspace did not hold is left out
 * of the run's patch like a `.gitignore`d one, whether or not the repository ignores it:
 * dependencies are the setup's output, never the model's change. (Python, Go, Cargo and
 * Maven install under /cache, outside the workspace: sandbox/cache-env.ts.)
 *
 * Must never: hide a path the base holds (a vendored, tracked node_modules file that the run
 * changed is in the patch like any tracked file).
 */
const DEPENDENCY_DIR = /(^|\/)node_modules(\/|$)/;

/** True for a path inside a dependency folder. */
export function isDependencyPath(path: string): boolean {
  return DEPENDENCY_DIR.test(path);
}
