/**
 * Test fixtures for redaction on hostile input: a redactor with values, keys and patterns,
 * a realistic 1 MiB tool output, and text shaped to make a careless scanner backtrack or
 * rescan (long words, dense keys, hex and dump lines, a value's prefix repeated), with the
 * functions that redact them whole or streamed. redaction.test.ts runs those functions in
 * a worker under a generous hard cap (runaway work fails it, a slow machine does not);
 * bench/hostile-input.ts times them and reports how each grows with the input's size.
 *
 * For tests and benchmarks only; it must never be imported by production code.
 */
import { createRedactor, createStreamRedactor, type Redactor } from "./redaction.ts";

export const MiB = 1024 * 1024;
/** A value the redactor knows; it must never show in any output. */
export const TOKEN = "ghp_0123456789abcdefABCDEF";
const SPECIAL = "p4$$.w*rd+(x)?[a-z]{2}|^\\d/";
const SPACEY = "s3cret wörd & more=€/ok";
const QUOTEY = 'he said "hi"\n\tand\\left';
const hex = Buffer.from(TOKEN).toString("hex");
const b64 = (s: string) => Buffer.from(s).toString("base64");

let redactor: Redactor | undefined;

/** Five values, four keys, two patterns. */
export function hostileRedactor(): Redactor {
  redactor ??= createRedactor({
    secrets: () => [TOKEN, SPECIAL, SPACEY, QUOTEY, "db-pass-7f3a9c"],
    keys: ["TOKEN", "PASSWORD", "SECRET", "API_KEY"],
    patterns: ["sk-[A-Za-z0-9]{20,}", "AKIA[0-9A-Z]{16}"],
  });
  return redactor;
}

/** `n` characters of tool output: stack traces, base64, test lines, a leak every 50 lines. */
export function toolOutput(n: number): string {
  const parts: string[] = [];
  let len = 0;
  for (let i = 0; len < n; i++) {
    const line =
      i % 50 === 0
        ? `leak ${TOKEN} and GITHUB_TOKEN=abc${i} sk-${"x1".repeat(12)}`
        : i % 3 === 0
          ? `    at Object.<anonymous> (/workspace/src/file${i}.ts:${i}:12) key: value, a=b`
          : i % 3 === 1
            ? b64(`chunk ${i} `.repeat(8))
            : `PASS src/module-${i}.test.ts (${i % 97} ms) ✓ works with ümlauts €`;
    parts.push(line);
    len += line.length + 1;
  }
  return parts.join("\n").slice(0, n);
}

/** Text of about `n` characters in shapes that make a careless scanner superlinear. */
export const HOSTILE_SHAPES: Readonly<Record<string, (n: number) => string>> = {
  "a long word": (n) => "A".repeat(n),
  "dense a=": (n) => "a=".repeat(n / 2),
  "open quotes": (n) => 'token: "x '.repeat(n / 10),
  "dense a:": (n) => "a:".repeat(n / 2),
  "percent signs": (n) => "%".repeat(n),
  "dense keys": (n) => "token=x ".repeat(n / 8),
  "key names": (n) => "tokentoken".repeat(n / 10),
  "a key in a long word": (n) => `${"A".repeat(n / 2)}token=${"B".repeat(n / 2)}`,
  "hex digits": (n) => "0123456789abcdef".repeat(n / 16),
  spaces: (n) => " ".repeat(n),
  "line breaks": (n) => "\n".repeat(n),
  "hex lines": (n) => "a\n".repeat(n / 2),
  "groups with wide gaps": (n) => "67 68  70  5f   ".repeat(n / 16),
  "one-byte groups": (n) => " ab".repeat(n / 3),
  "offsets only": (n) => "00000000:\n".repeat(n / 10),
  "the value's hex but one byte": (n) => `${hex.slice(0, -2)} `.repeat(n / hex.length),
  "the value's start": (n) => TOKEN.slice(0, -1).repeat(n / TOKEN.length),
  "dump lines holding most of the value": (n) =>
    `00000000: ${hex.slice(0, 32).replace(/(.{4})/g, "$1 ")}  ghp_0123456789ab\n`.repeat(n / 68),
};

/** Shapes streamed in chunks of the given size, flushed after every chunk. */
export const STREAM_SHAPES: Readonly<Record<string, [(n: number) => string, number]>> = {
  "a long line": [(n) => `${"word ".repeat(n / 5)}GITHUB_TOKEN=abc\n`, 7],
  "a secret repeated": [(n) => TOKEN.repeat(n / TOKEN.length), 512],
  "a secret repeated, tiny chunks": [(n) => TOKEN.repeat(n / TOKEN.length), 7],
  "an open hex line": [(n) => "ab ".repeat(n / 3), 64],
  "a value's start in dump lines": [(n) => `6768 705f\n`.repeat(n / 10), 64],
};

/** What redacting produced: its length, and whether the known value or a keyed one leaked. */
export interface Redacted {
  inputChars: number;
  outputChars: number;
  leaked: boolean;
}

const leaks = (out: string): boolean => out.includes(TOKEN) || /GITHUB_TOKEN=abc/.test(out);

function redacted(input: string, out: string): Redacted {
  return { inputChars: input.length, outputChars: out.length, leaked: leaks(out) };
}

/** `toolOutput(n)` redacted whole. */
export function redactToolOutput(n: number): Redacted {
  const text = toolOutput(n);
  return redacted(text, hostileRedactor().text(text));
}

/** The hostile shape `label` at `n` characters, redacted whole. */
export function redactShape(label: string, n: number): Redacted {
  const make = HOSTILE_SHAPES[label];
  if (make === undefined) throw new Error(`no hostile shape ${label}`);
  const text = make(n);
  return redacted(text, hostileRedactor().text(text));
}

/** `text` through a stream redactor in chunks of `size`, flushing after each when `flush`. */
export function streamed(text: string, size: number, flush: boolean, maxSecret: number): string {
  const s = createStreamRedactor(hostileRedactor(), maxSecret);
  let out = "";
  for (let i = 0; i < text.length; i += size) {
    out += s.push(text.slice(i, i + size));
    if (flush) out += s.flush();
  }
  return out + s.end();
}

/** The stream shape `label` at `n` characters, streamed in its chunks, flushed after each. */
export function streamShape(label: string, n: number): Redacted {
  const shape = STREAM_SHAPES[label];
  if (shape === undefined) throw new Error(`no stream shape ${label}`);
  const text = shape[0](n);
  return redacted(text, streamed(text, shape[1], true, 256));
}

/** `toolOutput(n)` streamed in chunks of 512 (not flushed). */
export function streamToolOutput(n: number): Redacted {
  const text = toolOutput(n);
  return redacted(text, streamed(text, 512, false, 4096));
}
