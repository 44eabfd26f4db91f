/**
 * A drive's copy of its run's name key (kernel/held-names.ts): the kernel's, or fetched
 * from the log once and kept on the kernel run. Must never: fetch it for a run that holds
 * nothing (calls that carry no secret never pay for it), or log or record its bytes.
 */
import { type NameKey, nameKey } from "../kernel/held-names.ts";
import type { Drive } from "./drive.ts";

export async function runNameKey(d: Drive): Promise<NameKey> {
  const run = d.kernelRun;
  if (run?.nameKey !== undefined) return run.nameKey;
  const key = nameKey(await d.deps.log.runNameKey(d.runId));
  if (run !== undefined) run.nameKey = key;
  return key;
}
