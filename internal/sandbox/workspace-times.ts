/**
 * File times in workspace archives, to the nanosecond. A snapshot (a paused run's workspace)
 * keeps each entry's modification time, so a run resumed in a new container sees the files
 * as it left them: a same-size edit made before the pause is still newer than the `.pyc`,
 * the make target or the Go test cache entry built from the old content. Uploads keep
 * mtime 0 (the same tree gives the same bytes: their digests deduplicate).
 *
 * Read from a PAX `mtime` record (GNU tar --format=posix writes nanoseconds) when it is
 * well formed, else from the ustar field (whole seconds; busybox tar writes only that).
 * Must never: throw on a time, however hostile (malformed, negative, huge, in the future:
 * each is clamped into [0, notAfter]), or let a time change an entry's path or content.
 */
import type * as tar from "tar-stream";

/** A modification time: whole seconds since the epoch and nanoseconds within the second. */
export interface FileTime {
  sec: number;
  nsec: number;
}

/** The epoch: what uploads get, and what a time that cannot be read becomes. */
export const EPOCH_TIME: FileTime = Object.freeze({ sec: 0, nsec: 0 });

/**
 * The latest second a tar header here can hold: tar-stream writes the ustar field from a
 * 32-bit integer (2038-01-19); a later time would wrap to a negative one.
 */
export const MAX_TIME_SEC = 2 ** 31 - 1;

/** Longest PAX `mtime` value read; a longer one is not a time (the ustar field is used). */
const MAX_PAX_TIME_CHARS = 64;

/** A PAX time: optional minus, decimal seconds, optional fraction (POSIX 1003.1 pax). */
const PAX_TIME = /^(-?)(\d+)(?:\.(\d+))?$/;

/**
 * The modification time of an archive entry: the PAX `mtime` record if it is a well-formed
 * decimal time, else the ustar field; clamped to [0, MAX_TIME_SEC]. Never throws.
 */
export function entryTime(header: tar.Header): FileTime {
  const pax = header.pax as Record<string, unknown> | null | undefined;
  const fromPax = parsePaxTime(pax?.mtime);
  if (fromPax !== undefined) return fromPax;
  const ms = header.mtime instanceof Date ? header.mtime.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) return EPOCH_TIME;
  return clampTime({ sec: Math.floor(ms / 1000), nsec: 0 });
}

/** A PAX `mtime` value as a time (clamped), or undefined when it is not one. */
export function parsePaxTime(value: unknown): FileTime | undefined {
  if (typeof value !== "string" || value.length > MAX_PAX_TIME_CHARS) return undefined;
  const m = PAX_TIME.exec(value);
  if (m === null) return undefined;
  const [, minus, whole = "0", fraction = ""] = m;
  // Before the epoch (or a "-0.5"): the epoch. Past 2038: the cap (a Number holds the digits
  // of any 64-character value without throwing; precision does not matter up there).
  if (minus === "-" && /[1-9]/.test(whole + fraction)) return EPOCH_TIME;
  const sec = Number(whole);
  if (sec > MAX_TIME_SEC) return { sec: MAX_TIME_SEC, nsec: 0 };
  return { sec, nsec: Number(fraction.slice(0, 9).padEnd(9, "0")) };
}

/** `t` within [0, MAX_TIME_SEC] and, when given, not later than `notAfter`. */
export function clampTime(t: FileTime, notAfter?: FileTime): FileTime {
  if (!(t.sec >= 0) || !Number.isInteger(t.sec)) return EPOCH_TIME;
  const nsec = Number.isInteger(t.nsec) && t.nsec >= 0 && t.nsec < 1e9 ? t.nsec : 0;
  let c = t.sec > MAX_TIME_SEC ? { sec: MAX_TIME_SEC, nsec: 0 } : { sec: t.sec, nsec };
  if (notAfter !== undefined && compareTimes(c, notAfter) > 0) c = notAfter;
  return c;
}

/** Negative, zero or positive as `a` is before, at or after `b`. */
export function compareTimes(a: FileTime, b: FileTime): number {
  return a.sec === b.sec ? a.nsec - b.nsec : a.sec - b.sec;
}

/** A time in milliseconds since the epoch (e.g. Date.now()), to the end of that millisecond. */
export function timeOfMs(ms: number): FileTime {
  const whole = Math.floor(ms);
  return clampTime({ sec: Math.floor(whole / 1000), nsec: (whole % 1000) * 1e6 + 999_999 });
}

/**
 * The time fields of a tar header for `t`: the ustar field (whole seconds, what every tar
 * reads) and, when `t` has nanoseconds, a PAX `mtime` record with them (GNU tar restores it).
 */
export function timeHeader(t: FileTime): { mtime: Date; pax?: Record<string, string> } {
  const mtime = new Date(t.sec * 1000);
  if (t.nsec === 0) return { mtime };
  const fraction = String(t.nsec).padStart(9, "0").replace(/0+$/, "");
  return { mtime, pax: { mtime: `${t.sec}.${fraction}` } };
}
