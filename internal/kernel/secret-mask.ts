/**
 * Masking of secret values in bytes whose length must not change — a paused run's
 * workspace snapshot, where a tar header already states each file's size: every covered
 * form of a value (secret-forms.ts, hex dumps included) is overwritten with `*`, byte for
 * byte. Bytes are read as latin1 (one character per byte), so spans map to bytes exactly;
 * a value with non-ASCII characters is also looked for as its UTF-8 bytes.
 *
 * Must never: change a length, emit a byte that could be part of a form still completing
 * (the end is held back until more bytes rule it out), or hold more than a few MiB.
 */
import type { Span } from "./redaction-spans.ts";
import { createValueMatcher, type ValueMatcher } from "./redaction-values.ts";

export interface SecretMask {
  /** `s` with every covered form of a value overwritten with `*` (same length). */
  text(s: string): string;
  /** The same over a byte stream, chunk by chunk. */
  stream(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array>;
}

/** Text is scanned in batches of at least this much (a tar chunk is often 512 bytes). */
const BATCH = 64 * 1024;
/** Held back text past this is cut anyway (an endless run of partial matches). */
const FORCE = 4 * 1024 * 1024;

/** A mask for `values`, or undefined when none is long enough to be masked. */
export function createSecretMask(values: readonly string[]): SecretMask | undefined {
  const all = new Set<string>();
  for (const v of values) {
    all.add(v);
    const bytes = Buffer.from(v, "utf8").toString("latin1");
    if (bytes !== v) all.add(bytes);
  }
  const m = createValueMatcher([...all]);
  if (m === undefined) return undefined;
  return {
    text: (s) => maskSpans(s, scanAll(m, s), s.length),
    stream: (source) => maskStream(m, source),
  };
}

function scanAll(m: ValueMatcher, s: string): Span[] {
  const spans: Span[] = [];
  m.scan(s, spans, false, "none");
  return spans;
}

async function* maskStream(
  m: ValueMatcher,
  source: AsyncIterable<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  let pending = "";
  let partialFirstLine = false;
  // A scan that could release little (a long run that may still be a dump of a value)
  // waits for the held text to double before the next: the work stays linear.
  let nextScanAt = BATCH;
  for await (const chunk of source) {
    pending += Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("latin1");
    if (pending.length < nextScanAt) continue;
    const spans: Span[] = [];
    const hold = m.scan(pending, spans, partialFirstLine, "all");
    let cut = Math.min(hold, pending.length);
    if (cut < pending.length / 2 && pending.length > FORCE)
      cut = pending.length - m.maxLiteralLength;
    cut = outsideSpans(spans, cut);
    nextScanAt = Math.max(
      BATCH,
      cut < pending.length / 2 ? 2 * (pending.length - Math.max(cut, 0)) : 0,
    );
    if (cut <= 0) continue;
    yield Buffer.from(maskSpans(pending, spans, cut), "latin1");
    partialFirstLine = pending.charCodeAt(cut - 1) !== 10;
    pending = pending.slice(cut);
  }
  if (pending.length > 0) {
    const spans: Span[] = [];
    m.scan(pending, spans, partialFirstLine, "none");
    yield Buffer.from(maskSpans(pending, spans, pending.length), "latin1");
  }
}

/** `cut` moved back before any span it would split. */
function outsideSpans(spans: readonly Span[], cut: number): number {
  let c = cut;
  for (let changed = true; changed; ) {
    changed = false;
    for (const s of spans)
      if (s.start < c && c < s.end) {
        c = s.start;
        changed = true;
      }
  }
  return c;
}

/** `s[0, limit)` with every character inside a span turned into `*`. */
function maskSpans(s: string, spans: readonly Span[], limit: number): string {
  if (spans.length === 0) return limit === s.length ? s : s.slice(0, limit);
  let out = "";
  let at = 0;
  for (const span of [...spans].sort((a, b) => a.start - b.start)) {
    const start = Math.max(span.start, at);
    const end = Math.min(span.end, limit);
    if (end <= start) continue;
    out += s.slice(at, start) + "*".repeat(end - start);
    at = end;
  }
  return out + s.slice(at, limit);
}
