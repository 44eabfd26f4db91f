/**
 * What a one-process ledger (`agentd dev` on the embedded log) is counted again from at
 * start: the stored runs, their events and the live upload receipts. The embedded log's
 * deletion store provides it (lifecycle/file-run-deletion.ts ledgerSource).
 * Must never: list a run whose deletion began.
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";

export interface StoredRuns {
  /** Every stored run not being deleted. */
  runIds(): Iterable<string>;
  tenantOf(runId: string): Promise<string | undefined>;
  /** The digests the run's events name. */
  digests(runId: string): Promise<string[]>;
  /** The run's events, oldest first. */
  events(runId: string): Promise<LoggedEvent[]>;
  /** Every live upload receipt as [tenant, digest]. */
  receipts(): Iterable<readonly [string, string]>;
}
