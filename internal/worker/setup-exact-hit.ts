/**
 * Whether a restored dependency cache is an exact hit for a run's setup (issue #24): the
 * archive was saved under exactly the key this run's own setup would save (same tenant, same
 * image build, same setup line, same digest of every setup input; cache-key.ts), the image
 * is named by a build id (a bare tag moves between builds), the setup line is one whose whole
 * outcome is in the archive and whose inputs are all keyed (SetupSpec.outcomeInCache,
 * setup-detect.ts), and for npm the archive carries the installed tree. Then the setup call
 * is still decided by the kernel and recorded, but answers from the cache without running.
 *
 * Pure. Must never call a restore exact when any of those fails, nor for a resumed run
 * (its restore is of its own archive, decided elsewhere), nor for a configured line.
 */
import { type CacheKeyInput, cacheKey } from "./cache-key.ts";

export interface ExactHitInput {
  /** The key the restored archive was saved under (the store's entry). */
  restoredKey: string;
  /** What this run's key is made of. */
  run: CacheKeyInput;
  /** Whether the archive carried an installed tree (node_modules). */
  installedTree: boolean;
}

/** An engine image id (sha256:…), alone or after a name (image@sha256:…). */
const BUILD_ID = /(^|@)sha256:[0-9a-f]{64}$/;

export function exactHit(i: ExactHitInput): boolean {
  const { setup, image } = i.run;
  if (setup.outcomeInCache !== true) return false;
  if (!BUILD_ID.test(image)) return false;
  if (setup.ecosystem === "npm" && !i.installedTree) return false;
  const key = cacheKey(i.run);
  return key !== undefined && key.key === i.restoredKey;
}
