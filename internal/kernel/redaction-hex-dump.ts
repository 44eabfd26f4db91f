/**
 * Finds secret values in hex dumps that run over several lines (`xxd`, `xxd -g1`, `xxd -u`,
 * `xxd -p`, `od -An -tx1`, `od -tx1`, `od -A x -t x1z`, `od -x`, `hexdump`, `hexdump -C`,
 * GNU and busybox alike), with the value at any byte offset. Consecutive dump lines form a
 * region whose bytes are read in order (redaction-dump-line.ts); each value's UTF-8 bytes
 * are looked up in the region, as printed and with each group reversed (little-endian
 * words, at either alignment), and a hit redacts every line it touches, offset and text
 * columns included. For live streams it also says where a dump that may still be
 * printing a value begins, so that nothing of it is emitted early.
 *
 * Linear in the text: one regex finds candidate lines (its quantifiers never overlap, so
 * a failed attempt backs off over a line at most once) and each line is read by hand. It
 * must never emit or keep the bytes it decodes.
 */
import {
  type ByteSink,
  createByteSink,
  type PrintingLine,
  printingLine,
  readDumpLine,
} from "./redaction-dump-line.ts";
import { failureTable, longestPrefixAtEnd } from "./redaction-prefix.ts";
import type { Span } from "./redaction-spans.ts";

export interface HexDumpMatcher {
  /**
   * Adds a span for every run of whole lines of `s` holding a value in a dump. With `live`
   * (`s` is a live stream's buffer, more may follow), answers where a dump may still be
   * printing a value: the start of the first line to hold back whole (the text's length
   * when none). With `partialFirstLine`, `s` starts inside a line, which is not read.
   */
  scan(s: string, spans: Span[], partialFirstLine: boolean, live: boolean): number;
}

/**
 * A line break before a line that may be a dump line: blanks, then an even run of hex
 * digits ending at a blank or the line's end (data), or a run (maybe with ":") and blanks
 * before two hex digits (an offset, then data). Led by "\n" rather than `^` with the `m`
 * flag: V8 then skips from line break to line break (4x faster on ordinary output).
 */
const CANDIDATE =
  /\n[ \t]*(?:(?:[0-9A-Fa-f]{2})+(?=[ \t\r\n]|$)|[0-9A-Fa-f]+:?[ \t]+[0-9A-Fa-f]{2})/g;
/** The same at the start of the text. */
const FIRST_CANDIDATE =
  /^[ \t]*(?:(?:[0-9A-Fa-f]{2})+(?=[ \t\r\n]|$)|[0-9A-Fa-f]+:?[ \t]+[0-9A-Fa-f]{2})/;

/** A matcher for the UTF-8 bytes of `values` (at least one). */
export function createHexDumpMatcher(values: readonly Uint8Array[]): HexDumpMatcher {
  const needles = values.map((bytes) => ({ bytes: Buffer.from(bytes), fail: failureTable(bytes) }));
  const sink = createByteSink();
  const region = createRegion();
  return {
    scan(s, spans, partialFirstLine, live) {
      let hold = s.length;
      const closeRegion = (mayGoOn: boolean): void => {
        if (region.count > 0) {
          findValues(needles, sink, region, spans);
          if (mayGoOn) hold = Math.min(hold, prefixStart(needles, sink, region));
        }
        region.count = 0;
        sink.length = 0;
        sink.words = false;
      };
      const lastStart = s.lastIndexOf("\n") + 1;
      // The last line, when its line break has not arrived yet (a live stream's buffer).
      const printing: PrintingLine =
        !live || lastStart === s.length || (lastStart === 0 && partialFirstLine)
          ? "none"
          : printingLine(s, lastStart, s.length);
      /** Where the next line of the current region must start (-1: no region). */
      let expected = -1;
      /** The hold for the region above a last line that is still open. */
      let above = Number.POSITIVE_INFINITY;
      let stop = 0;
      const first = !partialFirstLine && FIRST_CANDIDATE.test(s) ? 0 : nextCandidate(s, 0);
      // After a dump line, the next line is read at once (no regex): dumps come in runs.
      for (
        let start = first;
        start !== -1;
        start = expected > 0 && expected < s.length ? expected : nextCandidate(s, stop)
      ) {
        const nl = s.indexOf("\n", start);
        stop = nl === -1 ? s.length : nl;
        const end = stop > start && s.charCodeAt(stop - 1) === 13 ? stop - 1 : stop;
        if (start !== expected) closeRegion(false);
        if (nl === -1 && printing === "open" && start === expected) {
          above = prefixStart(needles, sink, region);
        }
        if (!readDumpLine(s, start, end, sink)) {
          closeRegion(false);
          expected = -1;
          continue;
        }
        addLine(region, start, end, sink.length);
        // A last line whose bytes are decided stays in its region, which may go on.
        expected = nl !== -1 ? nl + 1 : printing === "final" ? s.length : -1;
      }
      if (printing === "open") {
        // It may be (part of) a dump still printing: hold it whole, and the lines above it
        // when their bytes end with the start of a value.
        if (expected === lastStart) above = prefixStart(needles, sink, region);
        hold = Math.min(hold, lastStart, above);
      }
      closeRegion(live && expected === s.length);
      return hold;
    },
  };
}

/** The start of the first candidate line after a line break at or after `from`, or -1. */
function nextCandidate(s: string, from: number): number {
  CANDIDATE.lastIndex = from;
  const m = CANDIDATE.exec(s);
  return m === null ? -1 : m.index + 1;
}

/** The lines of a run of dump lines (typed arrays: a dump can have 100,000s of lines). */
interface Region {
  /** `[start, end)` of each line. */
  lines: Int32Array;
  /** Bytes held once each line is read (ascending). */
  byteEnds: Int32Array;
  /** Lines held. */
  count: number;
}

function createRegion(): Region {
  return { lines: new Int32Array(128), byteEnds: new Int32Array(64), count: 0 };
}

function addLine(region: Region, start: number, end: number, bytes: number): void {
  if (region.count === region.byteEnds.length) {
    const lines = new Int32Array(region.lines.length * 2);
    lines.set(region.lines);
    const byteEnds = new Int32Array(region.byteEnds.length * 2);
    byteEnds.set(region.byteEnds);
    region.lines = lines;
    region.byteEnds = byteEnds;
  }
  region.lines[2 * region.count] = start;
  region.lines[2 * region.count + 1] = end;
  region.byteEnds[region.count] = bytes;
  region.count += 1;
}

interface Needle {
  bytes: Buffer;
  fail: Int32Array;
}

function findValues(needles: readonly Needle[], sink: ByteSink, region: Region, spans: Span[]) {
  const views = [Buffer.from(sink.printed.buffer, 0, sink.length)];
  if (sink.words) views.push(Buffer.from(sink.swapped.buffer, 0, sink.length));
  for (const view of views) {
    for (const { bytes } of needles) {
      for (let at = view.indexOf(bytes); at !== -1; at = view.indexOf(bytes, at + 1)) {
        const first = lineOf(region, at);
        const last = lineOf(region, at + bytes.length - 1);
        const start = region.lines[2 * first] as number;
        spans.push({ start, end: region.lines[2 * last + 1] as number, from: start, open: false });
      }
    }
  }
}

/** The start of the first line of the longest tail of the region that begins some value. */
function prefixStart(needles: readonly Needle[], sink: ByteSink, region: Region): number {
  let earliest = Number.POSITIVE_INFINITY;
  const n = region.count === 0 ? 0 : (region.byteEnds[region.count - 1] as number);
  const views = sink.words ? [sink.printed, sink.swapped] : [sink.printed];
  for (const view of views) {
    for (const { bytes, fail } of needles) {
      const k = longestPrefixAtEnd(view, n, bytes, fail);
      if (k > 0) earliest = Math.min(earliest, region.lines[2 * lineOf(region, n - k)] as number);
    }
  }
  return earliest;
}

/** The line of the region holding byte `at`. */
function lineOf(region: Region, at: number): number {
  let lo = 0;
  let hi = region.count - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((region.byteEnds[mid] as number) > at) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
