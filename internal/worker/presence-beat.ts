/**
 * A worker's presence beat (scheduler/presence.ts): one beat at start, before its warm
 * sandboxes exist, then every third of its lease ttl, so one lost beat never makes it look
 * dead. Other workers' reapers remove the warm sandboxes of a worker whose beats stopped:
 * a SIGKILLed worker's pool is gone within its ttl plus one reaper period.
 *
 * Must never: stop the worker when a beat fails (the next one tries again; a worker seen
 * dead for a moment loses at most its idle warm containers, never a run).
 */
import type { WorkerPresence } from "../scheduler/presence.ts";

export interface PresenceBeat {
  stop(): void;
}

export async function startPresenceBeat(
  presence: WorkerPresence,
  workerId: string,
  ttlMs: number,
  onError: (err: unknown) => void,
): Promise<PresenceBeat> {
  const beat = (): Promise<void> => presence.beat(workerId, ttlMs).catch(onError);
  await beat();
  const timer = setInterval(() => void beat(), Math.max(1, Math.floor(ttlMs / 3)));
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
