/**
 * Live redaction of a process's output, chunk by chunk, so that output can be shown while
 * the process runs. It holds back only what could still turn out to be (part of) a secret
 * form, a keyed value or a pattern match, and emits the rest redacted.
 *
 * It must never emit a character that a scan of the whole text would have redacted: every
 * cut it makes is checked against the matches found so far and the ones that could still
 * be completing at the end of the buffer.
 */
import { AgentdError } from "../errors.ts";
import type { Redactor } from "./redaction.ts";
import { apply, type Holds, type Span, settle } from "./redaction-spans.ts";

export interface StreamRedactor {
  /**
   * Takes the next chunk; answers the redacted text that is safe to emit now (maybe "").
   * It holds back at least `maxSecretLength` characters, so most chunks answer "" while
   * output is short: call `flush` on a timer for live output.
   */
  push(chunk: string): string;
  /**
   * Answers everything taken so far that is safe to emit now, redacted: all of it but a
   * tail that could still be the start of a form of a known value, a keyed value or
   * pattern match that could still grow, and (with key or pattern rules) an unfinished
   * line. Cheap when nothing arrived since the last call ("" at once). Meant for a timer
   * (the kernel's 100 ms output coalescing); "" after `end`. While more than 64 KiB is held
   * back, it rescans only once the buffer has doubled (linear work for any caller).
   */
  flush(): string;
  /** The end of the stream: answers the rest, redacted. */
  end(): string;
}

/** What a stream needs from its redactor (registered by createRedactor). */
export interface RedactionScanner {
  /**
   * The merged spans of `s`, and where a form of a value may still be printing at its end
   * (as far as `holds` goes). `partialFirstLine`: `s` starts inside a line, which is then
   * not read as a hex-dump line (its start is gone).
   */
  scan(s: string, partialFirstLine: boolean, holds: Holds): { spans: Span[]; hold: number };
  /** The longest literal form of the values known now. */
  maxFormLength(): number;
  /** Keys or patterns are configured: their matches need whole lines around them. */
  hasContextRules: boolean;
}

const scanners = new WeakMap<Redactor, RedactionScanner>();

/** Lets createStreamRedactor use `redactor` (called by createRedactor only). */
export function registerScanner(redactor: Redactor, scanner: RedactionScanner): void {
  scanners.set(redactor, scanner);
}

/** Emit at least this many characters per scan (keeps tiny chunks from costing a rescan each). */
const MIN_EMIT = 64;
/** Held text up to this size is rescanned by every `flush` that has something new. */
const LIVE_LIMIT = 64 * 1024;
/** A pending buffer this large is flushed whatever it holds (the output cap is 1 MiB). */
const FORCE_FLUSH = 1024 * 1024;

/**
 * Redacts live output. `push` holds back a tail of at least `maxSecretLength` characters
 * (and the longest literal form of the values known now) and, with keys or patterns, emits
 * whole lines only; `flush` holds back only what could still be completing. Whichever
 * emits, no cut falls inside a match, right after one, before a match that could still
 * grow, or after the start of a form of a value that could still be printing (for a hex
 * dump: the start of the line holding the first byte that may begin a value). After a
 * cut inside a line, the rest of that line is not read as a dump line: it was not one, or
 * none of its bytes can begin a value.
 *
 * Guarantees, however the input is split and whenever `flush` is called:
 * 1. The concatenated output holds no covered form (redaction.ts) of a value known when
 *    it was scanned, and no key or pattern match that lies within one line.
 * 2. It equals `redactor.text(whole)` when the known values did not change meanwhile and
 *    no pattern match spans a line break (`flush` may cut at any line break; keyed values
 *    never span one).
 * Both hold unless a cut is forced: once 1 MiB is pending, `push` cuts at the safe place
 * if that emits at least half of it, else at the end. Only an unfinished line of 1 MiB
 * with key or pattern rules, 512 KiB of back-to-back matches, or a hex line still printing
 * after 512 KiB can force that; a match crossing the cut may then be split (its parts
 * redacted only where they still match) and a form being printed there may be cut.
 */
export function createStreamRedactor(redactor: Redactor, maxSecretLength: number): StreamRedactor {
  const inner = scanners.get(redactor);
  if (inner === undefined) {
    throw new AgentdError(
      "EVALIDATION",
      "createStreamRedactor needs a redactor from createRedactor",
      { field: "redactor" },
    );
  }
  if (!Number.isSafeInteger(maxSecretLength) || maxSecretLength < 0) {
    throw new AgentdError("EVALIDATION", "maxSecretLength: must be a non-negative integer", {
      field: "maxSecretLength",
    });
  }
  const scanner = inner;
  let pending = "";
  let ended = false;
  /** `pending` starts inside a line (after a cut that was not at a line break). */
  let partial = false;
  /** Text arrived since the last scan by `flush`. */
  let grown = false;
  /** Indexes in `pending` just after each line break, ascending (found once per chunk). */
  let breaks: number[] = [];
  /** `push` does not scan again before `pending` is this long (a scan that could emit little). */
  let nextScanAt = 0;
  /** The same for `flush`, only ever set past LIVE_LIMIT. */
  let nextFlushAt = 0;

  /** Emits `pending[0, cut)` redacted and keeps the rest. */
  function take(cut: number, spans: readonly Span[]): string {
    if (cut <= 0) return "";
    const head = apply(pending, spans, cut);
    partial = pending.charCodeAt(cut - 1) !== 10;
    pending = pending.slice(cut);
    if (breaks.length > 0) breaks = breaks.filter((b) => b > cut).map((b) => b - cut);
    return head;
  }

  /** The safe cut at or before `wanted`, and the spans to apply. */
  function cutAt(wanted: number, holds: Holds, forced: boolean) {
    const { spans, hold } = scanner.scan(pending, partial, holds);
    let cut = settle(pending, spans, Math.min(wanted, hold), !forced);
    // Forced: a cut through a run of matches or a held hex line rather than no cut at all;
    // never inside a closed match (its rest would go out bare), so past its end.
    if (forced && cut < wanted / 2) cut = pastClosedSpan(spans, wanted);
    return { cut, spans };
  }

  return {
    push(chunk: string): string {
      if (ended) throw new AgentdError("EVALIDATION", "push after end", { field: "chunk" });
      if (chunk.length === 0) return "";
      const base = pending.length;
      pending += chunk;
      grown = true;
      if (scanner.hasContextRules) {
        for (let i = 0; i < chunk.length; i++) {
          const c = chunk.charCodeAt(i);
          if (c === 10 || c === 13) breaks.push(base + i + 1);
        }
      }
      const len = pending.length;
      const hold = Math.max(maxSecretLength, scanner.maxFormLength());
      const forced = len >= Math.max(FORCE_FLUSH, 4 * hold);
      // Even a forced cut keeps the last `hold` back: a value still printing may start there.
      let wanted = len - hold;
      if (!forced && scanner.hasContextRules) wanted = lastAtMost(breaks, wanted);
      // Scan when at least `hold` (or MIN_EMIT) can go: each character is scanned about
      // twice, not once per chunk; `flush` is what makes output live. Nothing to hold:
      // every chunk goes at once.
      const least = hold === 0 ? 1 : Math.max(hold, MIN_EMIT);
      if (!forced && (wanted < least || len < nextScanAt)) return "";
      // `wanted` is at least the longest literal form from the end: no literal form that
      // is still printing can start before it, so only a forced cut needs them counted.
      const { cut, spans } = cutAt(wanted, forced ? "all" : "dumps", forced);
      // A scan that had to give most of it back (a long run of matches near the end) waits
      // for the buffer to double before the next one: the work stays linear.
      nextScanAt = cut < wanted / 2 ? 2 * (len - cut) : 0;
      if (cut > 0) nextFlushAt = 0;
      return take(cut, spans);
    },
    flush(): string {
      if (ended || !grown || pending.length < nextFlushAt) return "";
      grown = false;
      const len = pending.length;
      const wanted = scanner.hasContextRules ? lastAtMost(breaks, len) : len;
      if (wanted === 0) return "";
      const { cut, spans } = cutAt(wanted, "all", false);
      // Most of a large buffer held (an open line of megabytes): wait for it to double, as
      // push does, so a flush per chunk stays linear. Below LIVE_LIMIT every flush scans.
      nextFlushAt = len > LIVE_LIMIT && cut < wanted / 2 ? 2 * (len - cut) : 0;
      return take(cut, spans);
    },
    end(): string {
      ended = true;
      const rest = pending;
      pending = "";
      if (rest === "") return "";
      return apply(rest, scanner.scan(rest, partial, "none").spans, rest.length);
    },
  };
}

/** `cut`, or the end of the closed span it falls inside (an open one may still grow: cut it). */
function pastClosedSpan(spans: readonly Span[], cut: number): number {
  for (const span of spans) if (span.from < cut && cut < span.end && !span.open) return span.end;
  return cut;
}

/** The largest of the ascending `list` that is at most `limit`, or 0. */
function lastAtMost(list: readonly number[], limit: number): number {
  let lo = 0;
  let hi = list.length - 1;
  let best = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = list[mid] as number;
    if (v <= limit) {
      best = v;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}
