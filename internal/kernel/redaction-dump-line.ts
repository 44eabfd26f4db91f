/**
 * Reads the bytes off one line of a hex dump, as `xxd`, `od -t x…`, `hexdump` (GNU and
 * busybox) print them: optional blanks, an optional offset column, groups of hex digits,
 * and an optional text column. The bytes go to a sink in two orders: as printed, and with
 * each group of 2 to 8 bytes reversed (the little-endian words of `od -x`, `hexdump`,
 * `xxd -e`).
 *
 * Hand-written and linear in the line; it must never use a backtracking regex (dump
 * lines come from programs, hostile ones included).
 */

/** Bytes of consecutive dump lines in both orders. */
export interface ByteSink {
  /** The bytes as printed. */
  printed: Uint8Array;
  /** Each group's bytes reversed; kept only once `words` is true (until then, `printed`). */
  swapped: Uint8Array;
  /** Bytes held. */
  length: number;
  /** Some group held 2 to 8 bytes: `swapped` differs from `printed`. */
  words: boolean;
}

/** An empty sink. */
export function createByteSink(): ByteSink {
  return { printed: new Uint8Array(256), swapped: new Uint8Array(256), length: 0, words: false };
}

const HEX = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX[48 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[65 + c] = 10 + c;
  HEX[97 + c] = 10 + c;
}

function hexValue(code: number): number {
  return code < 128 ? (HEX[code] as number) : -1;
}

function isBlank(code: number): boolean {
  return code === 32 || code === 9;
}

function skipBlanks(s: string, i: number, end: number): number {
  let j = i;
  while (j < end && isBlank(s.charCodeAt(j))) j++;
  return j;
}

/** After the run of hex digits at `i`. */
function hexRun(s: string, i: number, end: number): number {
  let j = i;
  while (j < end && hexValue(s.charCodeAt(j)) >= 0) j++;
  return j;
}

/** A group of hex digits: an even run ending at a blank or the end of the line. */
function isGroup(s: string, start: number, stop: number, end: number): boolean {
  return stop > start && (stop - start) % 2 === 0 && (stop === end || isBlank(s.charCodeAt(stop)));
}

/**
 * Appends the bytes of the dump line `s[start, end)` (no line break in it) to `sink` and
 * answers true, or answers false and leaves the sink as it was. A line is a dump line
 * when, after blanks and an offset, it starts with at least one group. The offset is the
 * first run when it ends with ":" (xxd) or when it is followed by a group of another width
 * (od's 7 octal digits, hexdump -C's 8). Groups run to the first word that is not one, or
 * to a text column: a run after two or more blanks where the rest of the line is exactly
 * the printable rendering of the line's bytes, bare (xxd) or in `|…|` (hexdump -C) or
 * `>…<` (od -t x1z), so a text column that starts with hex-looking words is not read as
 * data.
 */
export function readDumpLine(s: string, start: number, end: number, sink: ByteSink): boolean {
  const first = skipBlanks(s, start, end);
  const firstStop = hexRun(s, first, end);
  let at: number;
  if (firstStop > first && s.charCodeAt(firstStop) === 58 && firstStop < end) {
    at = firstStop + 1;
    if (at < end && !isBlank(s.charCodeAt(at))) return false;
  } else {
    if (firstStop === first || (firstStop < end && !isBlank(s.charCodeAt(firstStop)))) return false;
    const second = skipBlanks(s, firstStop, end);
    const secondStop = hexRun(s, second, end);
    const offset = isGroup(s, second, secondStop, end) && secondStop - second !== firstStop - first;
    if (offset) at = firstStop;
    else if ((firstStop - first) % 2 === 0) at = first;
    else return false;
  }
  const lineStart = sink.length;
  for (;;) {
    const group = skipBlanks(s, at, end);
    if (group >= end) break;
    const stop = group === first ? firstStop : hexRun(s, group, end);
    if (!isGroup(s, group, stop, end)) break;
    if (
      group - at >= 2 &&
      sink.length > lineStart &&
      isTextColumn(s, at, group, end, sink, lineStart)
    )
      break;
    appendGroup(s, group, stop, sink);
    at = stop;
  }
  return sink.length > lineStart;
}

/** What the line being printed at the end of a live stream may still turn into. */
export type PrintingLine =
  /** Never a dump line, whatever is appended. */
  | "none"
  /** A dump line whose bytes are decided: appending text cannot change them. */
  | "final"
  /** It may still be or become a dump line with other bytes. */
  | "open";

/**
 * Classifies `s[start, end)`, a line whose end has not arrived yet, the way readDumpLine
 * would read it once it has: "final" when a word that is not a group has been printed
 * after its groups and no earlier run could still turn out to be a text column (the rest
 * of the line is already longer than one would be), "none" when its first words already
 * rule a dump line out, "open" otherwise (a line of blanks, a hex word still printing).
 */
export function printingLine(s: string, start: number, end: number): PrintingLine {
  const last = end > start && s.charCodeAt(end - 1) === 13 ? end - 1 : end; // "\r" of "\r\n"
  const first = skipBlanks(s, start, last);
  const firstStop = hexRun(s, first, last);
  if (firstStop === last) return "open";
  let at: number;
  if (firstStop > first && s.charCodeAt(firstStop) === 58) {
    at = firstStop + 1;
    if (at < last && !isBlank(s.charCodeAt(at))) return "none";
  } else {
    if (firstStop === first || !isBlank(s.charCodeAt(firstStop))) return "none";
    const second = skipBlanks(s, firstStop, last);
    const secondStop = hexRun(s, second, last);
    if (secondStop === last) return "open";
    const offset =
      isGroup(s, second, secondStop, last) && secondStop - second !== firstStop - first;
    if (offset) at = firstStop;
    else if ((firstStop - first) % 2 === 0) at = first;
    else return "none";
  }
  let bytes = 0;
  for (;;) {
    const group = skipBlanks(s, at, last);
    const stop = hexRun(s, group, last);
    if (stop === last) return "open";
    if (!isGroup(s, group, stop, last)) return bytes > 0 ? "final" : "none";
    if (group - at >= 2 && bytes > 0 && last - group <= bytes + 2) return "open";
    bytes += (stop - group) / 2;
    at = stop;
  }
}

function appendGroup(s: string, start: number, stop: number, sink: ByteSink): void {
  const n = (stop - start) / 2;
  if (sink.length + n > sink.printed.length) grow(sink, sink.length + n);
  const swap = n >= 2 && n <= 8;
  if (swap && !sink.words) {
    // The first word group: from here on `swapped` is kept (it was `printed` so far).
    sink.swapped.set(sink.printed.subarray(0, sink.length));
    sink.words = true;
  }
  if (n > 32) {
    // A long run (xxd -p -c 0, a hex blob): decoded natively.
    const bytes = Buffer.from(s.slice(start, stop), "hex");
    sink.printed.set(bytes, sink.length);
    if (sink.words) sink.swapped.set(bytes, sink.length);
  } else {
    for (let k = 0; k < n; k++) {
      const byte =
        (hexValue(s.charCodeAt(start + 2 * k)) << 4) | hexValue(s.charCodeAt(start + 2 * k + 1));
      sink.printed[sink.length + k] = byte;
      if (sink.words) sink.swapped[sink.length + (swap ? n - 1 - k : k)] = byte;
    }
  }
  sink.length += n;
}

function grow(sink: ByteSink, need: number): void {
  const size = Math.max(need, sink.printed.length * 2);
  const printed = new Uint8Array(size);
  printed.set(sink.printed.subarray(0, sink.length));
  const swapped = new Uint8Array(size);
  swapped.set(sink.swapped.subarray(0, sink.length));
  sink.printed = printed;
  sink.swapped = swapped;
}

/**
 * The end of the line, from within the gap `s[at, group)` of two or more blanks after the
 * last group, is the text column of the line's bytes (in either order): bare (xxd, whose
 * column may start with blanks for bytes 0x20) or in `|…|` or `>…<`.
 */
function isTextColumn(
  s: string,
  at: number,
  group: number,
  end: number,
  sink: ByteSink,
  from: number,
): boolean {
  const n = sink.length - from;
  for (const delimited of [false, true]) {
    const start = end - n - (delimited ? 2 : 0);
    if (start < at + 2 || start > group) continue;
    let inner = start;
    if (delimited) {
      const open = s.charCodeAt(start);
      const close = s.charCodeAt(end - 1);
      if (!((open === 124 && close === 124) || (open === 62 && close === 60))) continue;
      inner = start + 1;
    }
    if (rendersAs(s, inner, sink.printed, from, n)) return true;
    if (sink.words && rendersAs(s, inner, sink.swapped, from, n)) return true;
  }
  return false;
}

/** `s[at, at + n)` is `bytes[from, from + n)` with every unprintable byte shown as ".". */
function rendersAs(s: string, at: number, bytes: Uint8Array, from: number, n: number): boolean {
  for (let k = 0; k < n; k++) {
    const b = bytes[from + k] as number;
    if (s.charCodeAt(at + k) !== (b >= 0x20 && b <= 0x7e ? b : 46)) return false;
  }
  return true;
}
