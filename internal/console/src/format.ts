/** Formatting of states, times, sizes and durations for display. */
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { useEffect, useState } from "preact/hooks";
import { RunState } from "../../gen/agentd/v1/run_service_pb.js";

const STATE_NAMES: Record<RunState, string> = {
  [RunState.UNSPECIFIED]: "unknown",
  [RunState.QUEUED]: "queued",
  [RunState.RUNNING]: "running",
  [RunState.PAUSED]: "paused",
  [RunState.COMPLETED]: "completed",
  [RunState.FAILED]: "failed",
  [RunState.CANCELLED]: "cancelled",
};

export function stateName(state: RunState): string {
  return STATE_NAMES[state] ?? "unknown";
}

export const FILTER_STATES: readonly RunState[] = [
  RunState.QUEUED,
  RunState.RUNNING,
  RunState.PAUSED,
  RunState.COMPLETED,
  RunState.FAILED,
  RunState.CANCELLED,
];

export function isTerminal(state: RunState): boolean {
  return state === RunState.COMPLETED || state === RunState.FAILED || state === RunState.CANCELLED;
}

export function tsDate(ts: Timestamp | undefined): Date | undefined {
  return ts === undefined ? undefined : timestampDate(ts);
}

/** "just now", "3 min ago", "2 h ago", "4 d ago". */
export function ago(date: Date | undefined, now: number): string {
  if (date === undefined) return "";
  const s = Math.max(0, Math.round((now - date.getTime()) / 1000));
  if (s < 10) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.floor(h / 24)} d ago`;
}

export function duration(ms: bigint | number): string {
  const n = Number(ms);
  if (n < 1000) return `${n} ms`;
  if (n < 60_000) return `${(n / 1000).toFixed(1)} s`;
  return `${Math.floor(n / 60_000)} min ${Math.round((n % 60_000) / 1000)} s`;
}

export function bytes(n: bigint | number): string {
  const v = Number(n);
  if (v < 1024) return `${v} B`;
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(1)} KiB`;
  return `${(v / 1024 / 1024).toFixed(1)} MiB`;
}

export function dollars(micros: bigint): string {
  return `$${(Number(micros) / 1e6).toFixed(4)}`;
}

/** The current time, re-read every `everyMs` (ages stay fresh without a reload). */
export function useNow(everyMs = 15_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}
