/**
 * Redaction of tool output (and anything else bound for events, logs, spans, artifacts or
 * the model). Three rules, each run over the raw text, their hits merged and each merged
 * hit replaced by `[REDACTED]`. It must never let a covered form of a known value through,
 * and must never claim more than what is listed here.
 *
 * 1. Secret values (the resolver's known values) of at least MIN_SECRET_LENGTH (4)
 *    characters, in these forms and no others (secret-forms.ts, redaction-hex-dump.ts):
 *    - the value as it stands, in any letter case (`tr a-z A-Z`, upper, lower, mixed; the
 *      regex `i` flag without `u`: no length-changing mapping such as ß to SS);
 *    - reversed by code points (`rev` in a UTF-8 locale, busybox `rev` on Debian), any
 *      case; reversed by bytes and decoded with U+FFFD for broken UTF-8 (busybox `rev` in
 *      the C locale), when at least 4 of its characters are not U+FFFD (for an ASCII
 *      value both are the same string);
 *    - JSON-escaped as JavaScript, Python, PHP and Go encoders print it ("/" as "\/",
 *      non-ASCII as \uXXXX, <>& as \u003c and so on), any case;
 *    - URL-encoded (encodeURIComponent, form encoding with "+"), any case;
 *    - base64 of the UTF-8 bytes, standard and URL-safe, padded or not, exact case, also
 *      inside a longer base64 blob at any byte alignment (there only the part of the
 *      encoding that does not depend on the neighbours: up to 3 characters at the start
 *      and 1 at the end of the value's stretch stay; see base64Forms);
 *    - hexadecimal of the UTF-8 bytes, any case, contiguous on one line (`xxd -p` of a
 *      value up to 30 bytes, `od -An -tx1 | tr -d ' \n'`, logs and digests);
 *    - hex dumps over any number of lines, the value at any byte offset, as printed by
 *      GNU and busybox `xxd` (-g1, -g2, -g4, -c 8, -c 32, -u, -p, -e), `od` (-tx1, -An
 *      -tx1, -A x -t x1z, -A d, -x, -t x2, -t x4, -t x8) and `hexdump` (-C, -x, default):
 *      every byte of the value, little-endian words at either alignment included. A hit
 *      redacts every whole line it touches, offset and text columns too. A dump is read
 *      line by line: it is missed when other text is printed between its lines, when
 *      od or hexdump fold repeated lines inside the value into "*" (`od -v` does not), or
 *      when the value is upper-cased or otherwise changed before the dump.
 * 2. Keys: `KEY=value`, `KEY: value`, `"key": "value"` where the key contains one of the
 *    configured names (redaction-keys.ts).
 * 3. Patterns: every match of each configured regex; an empty match redacts nothing.
 *
 * Not covered, by design or because no redactor can know it: values shorter than 4
 * characters; part of a value (a prefix, a substring, every other character); a value
 * the program splits over separate writes with other text between, pads or interleaves
 * (`od -c`, `xxd -b`, `xxd -i`, octal, `\x` escapes, characters separated by spaces);
 * base64 wrapped over lines (`base64` wraps at 76 characters) or of a changed value;
 * changed case of an encoding (upper-cased base64); compression (gzip), encryption,
 * hashing, any other encoding or a combination of the above; values resolved after the
 * text was redacted. Policy and the jail are the real guard: redaction keeps honest
 * output clean, it cannot stop a program set on leaking a value it holds.
 *
 * Live output goes through createStreamRedactor (redaction-stream.ts): same forms,
 * however the output is split, with a `flush` for timers.
 */
import { AgentdError } from "../errors.ts";
import { compilePolicyRegex } from "./policy-regex.ts";
import { createKeyFinder } from "./redaction-keys.ts";
import { apply, type Holds, merge, REDACTED, type Span } from "./redaction-spans.ts";
import { registerScanner } from "./redaction-stream.ts";
import { createValueMatcher, type ValueMatcher } from "./redaction-values.ts";
import { safePut } from "./safe-put.ts";
import { MIN_SECRET_LENGTH } from "./secret-forms.ts";

export { createStreamRedactor, type StreamRedactor } from "./redaction-stream.ts";
export { base64Forms, secretForms } from "./secret-forms.ts";
export { MIN_SECRET_LENGTH, REDACTED };

export interface RedactorOptions {
  /** The secret values to hide, asked on every call (newly resolved values count at once). */
  secrets: () => readonly string[];
  /** Policy `redaction.keys`: names whose values are hidden (case-insensitive substrings). */
  keys?: readonly string[];
  /** Policy `redaction.patterns`: regular expressions whose matches are hidden. */
  patterns?: readonly string[];
}

export interface Redactor {
  /** `s` with every secret, keyed value and pattern match replaced by `[REDACTED]`. */
  text(s: string): string;
  /**
   * A deep copy of a JSON-like value with every string redacted (object keys too) and the
   * whole value of every object key that contains a redaction key replaced by `[REDACTED]`.
   * Byte arrays and dates are copied as they are (redact text before encoding it).
   */
  json<T>(v: T): T;
}

/** A redactor for `options`; refuses an empty key or a broken pattern (EVALIDATION). */
export function createRedactor(options: RedactorOptions): Redactor {
  const keys = createKeyFinder(options.keys ?? []);
  const patterns = (options.patterns ?? []).map((p, i) => {
    try {
      return compilePolicyRegex(p);
    } catch (err) {
      throw new AgentdError(
        "EVALIDATION",
        `redaction.patterns[${i}]: is not a valid regular expression in RE2 syntax (${(err as Error).message})`,
        { field: `redaction.patterns[${i}]` },
      );
    }
  });
  const values = createValueCache(options.secrets);

  function scan(s: string, partialFirstLine: boolean, holds: Holds) {
    const spans: Span[] = [];
    const hold = values()?.scan(s, spans, partialFirstLine, holds) ?? s.length;
    keys?.scan(s, spans);
    for (const p of patterns) {
      for (const { start, end } of p.matches(s)) {
        if (end === start) continue; // an empty match redacts nothing
        spans.push({ start, end, from: start, open: end === s.length });
      }
    }
    return { spans: merge(spans), hold };
  }

  function text(s: string): string {
    if (typeof s !== "string" || s.length === 0) return s;
    return apply(s, scan(s, false, "none").spans, s.length);
  }

  function walk(v: unknown, depth: number, ancestors: Set<object>): unknown {
    if (typeof v === "string") return text(v);
    if (v === null || typeof v !== "object") return v;
    if (depth > 512) return REDACTED; // fail closed rather than overflow the stack
    if (ArrayBuffer.isView(v)) return (v as unknown as { slice(): unknown }).slice();
    if (v instanceof Date) return new Date(v.getTime());
    if (ancestors.has(v)) return "[Circular]";
    ancestors.add(v);
    let out: unknown;
    if (Array.isArray(v)) {
      out = v.map((item) => walk(item, depth + 1, ancestors));
    } else {
      const src = v as Record<string, unknown>;
      const obj: Record<string, unknown> =
        Object.getPrototypeOf(src) === null ? Object.create(null) : {};
      for (const k of Object.keys(src)) {
        const value = keys?.isSecretKey(k) ? REDACTED : walk(src[k], depth + 1, ancestors);
        safePut(obj, text(k), value);
      }
      out = obj;
    }
    ancestors.delete(v);
    return out;
  }

  const redactor: Redactor = {
    text,
    json<T>(v: T): T {
      return walk(v, 0, new Set()) as T;
    },
  };
  registerScanner(redactor, {
    scan,
    maxFormLength: () => values()?.maxLiteralLength ?? 0,
    hasContextRules: keys !== undefined || patterns.length > 0,
  });
  return redactor;
}

/**
 * The value matcher for the values `secrets` answers now, rebuilt only when the set of
 * values changes (the list is asked on every call; the same list object is not re-read).
 */
function createValueCache(secrets: () => readonly string[]): () => ValueMatcher | undefined {
  let lastList: readonly string[] | undefined;
  let lastSignature = "";
  let matcher: ValueMatcher | undefined;
  return () => {
    const list = secrets();
    if (list === lastList) return matcher;
    lastList = list;
    const kept = [
      ...new Set(list.filter((v) => typeof v === "string" && v.length >= MIN_SECRET_LENGTH)),
    ].sort();
    const signature = kept.join("\0");
    if (signature === lastSignature && (matcher !== undefined || kept.length === 0)) return matcher;
    lastSignature = signature;
    matcher = createValueMatcher(kept);
    return matcher;
  };
}
