/**
 * Whether a drive's container is lost (sandbox port `lost`): asked after a call that failed,
 * before an approved call runs, and before the run completes or pauses, never per step (one engine round trip each). A drive that
 * finds it lost releases the run: the next drive (here or on another worker) finds no
 * running container, makes a new one and recovers the workspace (drive-start.ts,
 * workspace-recovery.ts), so a lost container is handled in one place. Must never: let the
 * model go on, or the run complete, in a container whose workspace is gone.
 */
import type { Drive } from "./drive.ts";

export async function boxLost(d: Drive): Promise<boolean> {
  return (await d.box?.lost?.()) === true;
}
