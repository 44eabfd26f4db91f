/**
 * Redaction of tool output (and anything else bound for events, logs, spans or the model).
 *
 * Three rules, all applied to the raw text in one scan each, their hits merged and each
 * merged hit replaced by `[REDACTED]`:
 *
 * - Secret values (the resolver's known values), in every form they are likely to leak in:
 *   plain; JSON-escaped (also with non-ASCII as \uXXXX and "/" as "\/"); URL-encoded
 *   (encodeURIComponent, form encoding with "+" for spaces, percent hex in either case);
 *   base64 (standard and URL-safe, padded and not) and, for a value inside a longer
 *   base64-encoded blob, the part of its encoding that does not depend on its neighbours,
 *   for each of the three byte alignments (see `base64Forms`). Values shorter than
 *   MIN_SECRET_LENGTH (4) characters are ignored: "abc" or "1" would hit all over ordinary
 *   output and say nothing useful. All forms of all values are one precompiled regex
 *   (longest form first), rebuilt only when the set of values changes.
 * - Keys: `KEY=value`, `KEY: value`, `"key": "value"` (also `:=`, `=>`, single quotes,
 *   an `Authorization: Bearer x` scheme word is kept) where the key contains one of the
 *   configured names, case-insensitively (GITHUB_TOKEN contains TOKEN): the value goes.
 *   An unquoted value runs to whitespace, a quote or "&"; a quoted one to its closing
 *   quote (or the end of the line when there is none).
 * - Patterns: every match of each configured regex (compiled once, `g`); a regex that
 *   matches the empty string never redacts an empty match.
 *
 * Best effort by nature: a secret transformed in any other way (hex, reversed, split by a
 * line-wrapping `base64`, gzip) is not recognised. Policy and the jail are the real guard.
 */
import { AgentdError } from "../errors.ts";
import { safePut } from "./safe-put.ts";

export const REDACTED = "[REDACTED]";

/** Values shorter than this are not redacted (too many false hits); see the file comment. */
export const MIN_SECRET_LENGTH = 4;

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

export interface StreamRedactor {
  /** Takes the next chunk; answers the redacted text that is safe to emit now (maybe ""). */
  push(chunk: string): string;
  /** The end of the stream: answers the rest, redacted. */
  end(): string;
}

/** A stretch of raw text to replace. */
interface Span {
  /** First character replaced. */
  start: number;
  /** After the last character replaced. */
  end: number;
  /** Where the match that found it begins (a key's name comes before the value it hides). */
  from: number;
  /** The match reaches the end of the text and could grow with more text. */
  open: boolean;
}

interface Internals {
  /** Merged, sorted, non-overlapping spans of `s`. */
  scan(s: string): Span[];
  /** The longest text a secret-value match can cover now. */
  maxFormLength(): number;
  /** Keys or patterns are configured: their matches need whole lines around them. */
  hasContextRules: boolean;
}

const internals = new WeakMap<Redactor, Internals>();

/** Characters a key is made of (`GITHUB_TOKEN`, `--password`, `spring.datasource.password`). */
function isKeyChar(c: number): boolean {
  return (
    (c >= 97 && c <= 122) ||
    (c >= 65 && c <= 90) ||
    (c >= 48 && c <= 57) ||
    c === 95 ||
    c === 46 ||
    c === 45
  );
}

/** Longest key considered. */
const MAX_KEY = 256;

interface KeyedValue {
  /** First character of the value (inside its quotes). */
  start: number;
  /** After its last character. */
  end: number;
  /** After everything matched (a closing quote included). */
  matchEnd: number;
  /** A quoted value whose closing quote was seen: it cannot grow. */
  closed: boolean;
}

const SCHEMES = new Set(["bearer", "basic", "token", "digest"]);

function isBlank(c: number): boolean {
  return c === 32 || c === 9;
}

/** JavaScript's \s. */
function isSpace(c: number): boolean {
  return (
    (c >= 9 && c <= 13) ||
    c === 32 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * After a key ending at `at`: blanks, a separator (`=`, `:`, `:=`, `=>`), blanks, and the
 * value: double-quoted (backslash escapes; to the end of the line when unclosed),
 * single-quoted, `\"`-quoted after a `\"`-quoted key (`escaped`), or a run without
 * whitespace, quotes or "&" (a leading scheme word such as `Bearer ` is kept). Undefined
 * when there is no separator or no value. Hand-written (no regex, no allocation but the
 * answer): this runs for every key name found.
 */
function valueAfter(s: string, at: number, escaped: boolean): KeyedValue | undefined {
  const len = s.length;
  let i = at;
  while (i < len && isBlank(s.charCodeAt(i))) i++;
  const c = s.charCodeAt(i);
  if (c === 58) {
    i += s.charCodeAt(i + 1) === 61 ? 2 : 1; // ":" or ":="
  } else if (c === 61) {
    i += s.charCodeAt(i + 1) === 62 ? 2 : 1; // "=" or "=>"
  } else {
    return undefined;
  }
  while (i < len && isBlank(s.charCodeAt(i))) i++;
  if (i >= len) return undefined;
  const q = s.charCodeAt(i);
  if (escaped && q === 92 && s.charCodeAt(i + 1) === 34) {
    let j = i + 2;
    let closed = false;
    while (j < len) {
      const d = s.charCodeAt(j);
      if (d === 10 || d === 13) break;
      if (d === 92) {
        if (s.charCodeAt(j + 1) === 34) {
          closed = true;
          break;
        }
        j += 2; // an escaped escape
        continue;
      }
      j++;
    }
    const end = Math.min(j, len);
    return { start: i + 2, end, matchEnd: closed ? end + 2 : end, closed };
  }
  if (q === 34 || q === 39) {
    let j = i + 1;
    for (; j < len; j++) {
      const d = s.charCodeAt(j);
      if (d === q || d === 10 || d === 13) break;
      if (d === 92 && q === 34) {
        const e = s.charCodeAt(j + 1);
        if (j + 1 >= len || e === 10 || e === 13 || e === 0x2028 || e === 0x2029) break;
        j++;
      }
    }
    const closed = j < len && s.charCodeAt(j) === q;
    return { start: i + 1, end: j, matchEnd: closed ? j + 1 : j, closed };
  }
  const isValueChar = (d: number) => !isSpace(d) && d !== 34 && d !== 39 && d !== 38;
  let start = i;
  let w = i;
  while (w < len && w - i < 7 && (s.charCodeAt(w) | 32) >= 97 && (s.charCodeAt(w) | 32) <= 122) w++;
  if (w > i && isBlank(s.charCodeAt(w)) && SCHEMES.has(s.slice(i, w).toLowerCase())) {
    let v = w;
    while (v < len && isBlank(s.charCodeAt(v))) v++;
    if (v < len && isValueChar(s.charCodeAt(v))) start = v;
  }
  let j = start;
  while (j < len && isValueChar(s.charCodeAt(j))) j++;
  if (j === start) return undefined;
  return { start, end: j, matchEnd: j, closed: false };
}

export function createRedactor(options: RedactorOptions): Redactor {
  const keyNames = (options.keys ?? []).map((k, i) => {
    if (typeof k !== "string" || k.length === 0) {
      throw new AgentdError("EVALIDATION", `redaction.keys[${i}]: must be a non-empty string`, {
        field: `redaction.keys[${i}]`,
      });
    }
    return k.toLowerCase();
  });
  const patterns = (options.patterns ?? []).map((p, i) => {
    try {
      return new RegExp(p, "g");
    } catch {
      throw new AgentdError(
        "EVALIDATION",
        `redaction.patterns[${i}]: is not a valid regular expression`,
        { field: `redaction.patterns[${i}]` },
      );
    }
  });
  const names =
    keyNames.length === 0
      ? undefined
      : new RegExp([...new Set(keyNames)].map(escapeRegex).join("|"), "gi");

  // The secret-value matcher, rebuilt when the set of values changes.
  let lastList: readonly string[] | undefined;
  let lastSignature = "";
  let secretRe: RegExp | undefined;
  let maxForm = 0;

  function secretMatcher(): RegExp | undefined {
    const list = options.secrets();
    if (list === lastList) return secretRe;
    lastList = list;
    const values = [
      ...new Set(list.filter((v) => typeof v === "string" && v.length >= MIN_SECRET_LENGTH)),
    ].sort();
    const signature = values.join("\0");
    if (signature === lastSignature && (secretRe !== undefined || values.length === 0))
      return secretRe;
    lastSignature = signature;
    const sources = new Map<string, number>();
    for (const value of values) {
      for (const form of secretForms(value)) sources.set(form.source, form.length);
    }
    const ordered = [...sources].sort((a, b) => b[1] - a[1]);
    maxForm = ordered[0]?.[1] ?? 0;
    secretRe =
      ordered.length === 0 ? undefined : new RegExp(ordered.map((f) => f[0]).join("|"), "g");
    return secretRe;
  }

  function isSecretKey(key: string): boolean {
    const lower = key.toLowerCase();
    for (const name of keyNames) if (lower.includes(name)) return true;
    return false;
  }

  function scan(s: string): Span[] {
    const spans: Span[] = [];
    const len = s.length;
    const re = secretMatcher();
    if (re !== undefined) {
      re.lastIndex = 0;
      for (let m = re.exec(s); m !== null; m = re.exec(s)) {
        const end = m.index + m[0].length;
        spans.push({ start: m.index, end, from: m.index, open: false });
        re.lastIndex = m.index + 1; // overlapping forms of different values are all found
      }
    }
    if (names !== undefined) {
      // Find the configured names themselves (rare in ordinary output), then look around
      // each: the key is the whole run of key characters holding it, then a separator.
      names.lastIndex = 0;
      for (let m = names.exec(s); m !== null; m = names.exec(s)) {
        let left = m.index;
        while (left > 0 && m.index - left <= MAX_KEY && isKeyChar(s.charCodeAt(left - 1))) left--;
        let right = m.index + m[0].length;
        while (right < len && isKeyChar(s.charCodeAt(right))) right++;
        names.lastIndex = right; // every name in this run names the same key: skip the run
        if (right - left > MAX_KEY) continue; // not a key: a long word
        let from = left;
        let at = right;
        let escaped = false;
        const q = s.charCodeAt(left - 1);
        if ((q === 34 || q === 39) && s.charCodeAt(right) === q) {
          from = left - 1;
          at = right + 1;
        } else if (
          q === 34 &&
          s.charCodeAt(left - 2) === 92 &&
          s.charCodeAt(right) === 92 &&
          s.charCodeAt(right + 1) === 34
        ) {
          from = left - 2; // JSON inside a JSON string: {\"password\":\"…\"}
          at = right + 2;
          escaped = true;
        }
        const v = valueAfter(s, at, escaped);
        if (v === undefined) continue;
        if (v.end > v.start) {
          spans.push({ start: v.start, end: v.end, from, open: !v.closed && v.end === len });
        }
        names.lastIndex = Math.max(right, v.matchEnd);
      }
    }
    for (const p of patterns) {
      p.lastIndex = 0;
      for (let m = p.exec(s); m !== null; m = p.exec(s)) {
        if (m[0].length === 0) {
          p.lastIndex = m.index + 1; // an empty match redacts nothing and must not loop
          continue;
        }
        const end = m.index + m[0].length;
        spans.push({ start: m.index, end, from: m.index, open: end === len });
      }
    }
    return merge(spans);
  }

  function text(s: string): string {
    if (typeof s !== "string" || s.length === 0) return s;
    return apply(s, scan(s), s.length);
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
        const value = isSecretKey(k) ? REDACTED : walk(src[k], depth + 1, ancestors);
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
  internals.set(redactor, {
    scan,
    maxFormLength: () => {
      secretMatcher();
      return maxForm;
    },
    hasContextRules: keyNames.length > 0 || patterns.length > 0,
  });
  return redactor;
}

/** Emit at least this many characters per scan (keeps tiny chunks from costing a rescan each). */
const MIN_EMIT = 64;
/** A pending buffer this large is flushed whatever it holds (the output cap is 1 MiB). */
const FORCE_FLUSH = 1024 * 1024;

/**
 * Redacts live output chunk by chunk. It holds back a tail long enough for any secret form
 * (at least `maxSecretLength` characters, and the longest encoded form of the values known
 * now), and, when keys or patterns are configured, emits whole lines only (a `KEY=value`
 * never spans lines), and never emits part of a match that could still grow. So the
 * concatenated output equals `redactor.text(whole)` however the input was split, with one
 * documented exception: a single line without any line break longer than 1 MiB is flushed
 * as it stands. `maxSecretLength` should also bound what a configured pattern can match.
 */
export function createStreamRedactor(redactor: Redactor, maxSecretLength: number): StreamRedactor {
  const inner = internals.get(redactor);
  if (inner === undefined) {
    throw new AgentdError(
      "EVALIDATION",
      "createStreamRedactor needs a redactor from createRedactor",
      {
        field: "redactor",
      },
    );
  }
  if (!Number.isSafeInteger(maxSecretLength) || maxSecretLength < 0) {
    throw new AgentdError("EVALIDATION", "maxSecretLength: must be a non-negative integer", {
      field: "maxSecretLength",
    });
  }
  let pending = "";
  let ended = false;
  /** Indexes in `pending` just after each line break, ascending (found once per chunk). */
  let breaks: number[] = [];
  /** Do not scan again before `pending` is this long (a scan that could emit little). */
  let nextScanAt = 0;

  return {
    push(chunk: string): string {
      if (ended) throw new AgentdError("EVALIDATION", "push after end", { field: "chunk" });
      if (chunk.length === 0) return "";
      const base = pending.length;
      pending += chunk;
      if (inner.hasContextRules) {
        for (let i = 0; i < chunk.length; i++) {
          const c = chunk.charCodeAt(i);
          if (c === 10 || c === 13) breaks.push(base + i + 1);
        }
      }
      const len = pending.length;
      const hold = Math.max(maxSecretLength, inner.maxFormLength());
      const force = len >= Math.max(FORCE_FLUSH, 4 * hold);
      let cut = force ? len : len - hold;
      if (!force && inner.hasContextRules) cut = lastAtMost(breaks, cut);
      if (!force && (cut < (hold === 0 ? 1 : MIN_EMIT) || len < nextScanAt)) return "";
      const spans = inner.scan(pending);
      const wanted = cut;
      if (!force) cut = settle(pending, spans, cut);
      // A scan that had to give most of it back (a long run of matches near the end) waits
      // for the buffer to double before the next one: the work stays linear.
      nextScanAt = cut < wanted / 2 ? 2 * (len - cut) : 0;
      if (cut <= 0) return "";
      const head = pending.slice(0, cut);
      pending = pending.slice(cut);
      if (breaks.length > 0) breaks = breaks.filter((b) => b > cut).map((b) => b - cut);
      return apply(head, spans, cut);
    },
    end(): string {
      ended = true;
      const rest = pending;
      pending = "";
      return redactor.text(rest);
    },
  };
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

/**
 * Moves `cut` back until it lies inside no match (counting a key before its value) and
 * before every match that could still grow, and not between the halves of a surrogate pair.
 */
function settle(s: string, spans: readonly Span[], cut: number): number {
  let c = cut;
  for (let changed = true; changed && c > 0; ) {
    changed = false;
    for (const span of spans) {
      if ((span.open && span.from < c) || (span.from < c && c < span.end)) {
        c = span.from;
        changed = true;
      }
    }
    const code = c > 0 ? s.charCodeAt(c - 1) : 0;
    if (code >= 0xd800 && code <= 0xdbff) {
      c -= 1;
      changed = true;
    }
  }
  return Math.max(c, 0);
}

/** Sorted and merged (in place: the spans are the scan's own): overlapping or touching become one. */
function merge(spans: Span[]): Span[] {
  if (spans.length <= 1) return spans;
  let sorted = true;
  for (let i = 1; i < spans.length && sorted; i++) {
    sorted = (spans[i - 1] as Span).start <= (spans[i] as Span).start;
  }
  if (!sorted) spans.sort((a, b) => a.start - b.start || b.end - a.end);
  let w = 0;
  for (let i = 1; i < spans.length; i++) {
    const cur = spans[w] as Span;
    const s = spans[i] as Span;
    if (s.start <= cur.end) {
      if (s.end > cur.end) cur.end = s.end;
      if (s.from < cur.from) cur.from = s.from;
      cur.open = cur.open || s.open;
    } else {
      w += 1;
      spans[w] = s;
    }
  }
  spans.length = w + 1;
  return spans;
}

/** `s[0, limit)` with every span inside it replaced. */
function apply(s: string, spans: readonly Span[], limit: number): string {
  if (spans.length === 0) return limit === s.length ? s : s.slice(0, limit);
  let out = "";
  let at = 0;
  for (const span of spans) {
    if (span.end > limit) break;
    out += s.slice(at, span.start) + REDACTED;
    at = span.end;
  }
  return out + s.slice(at, limit);
}

interface Form {
  /** Regex source (literal, with percent and \u hex digits in either case where encoded). */
  source: string;
  /** Characters it matches. */
  length: number;
}

/** Every form of `value` the redactor looks for, as regex sources. */
export function secretForms(value: string): Form[] {
  const literal = new Set<string>([value]);
  const hexFolded = new Set<string>();
  const json = JSON.stringify(value).slice(1, -1);
  literal.add(json);
  literal.add(json.replaceAll("/", "\\/"));
  hexFolded.add(
    json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
  );
  const utf8 = Buffer.from(value, "utf8");
  let uri: string | undefined;
  try {
    uri = encodeURIComponent(value);
  } catch {
    uri = undefined; // a lone surrogate: not URI-encodable, the form encoding below still is
  }
  if (uri !== undefined) {
    hexFolded.add(uri);
    hexFolded.add(uri.replaceAll("%20", "+"));
  }
  hexFolded.add(new URLSearchParams([["", value]]).toString().slice(1));
  for (const b64 of base64Forms(utf8)) literal.add(b64);
  const forms: Form[] = [];
  for (const f of literal)
    if (f.length >= MIN_SECRET_LENGTH) forms.push({ source: escapeRegex(f), length: f.length });
  for (const f of hexFolded) {
    if (f.length >= MIN_SECRET_LENGTH && !literal.has(f))
      forms.push({ source: foldHex(f), length: f.length });
  }
  return forms;
}

/**
 * The base64 forms of `bytes`: whole (standard and URL-safe, padded and not), and the
 * stable inner part for each alignment. Inside a longer blob the value starts at byte
 * offset 0, 1 or 2 of a 3-byte group; encode it after that many filler bytes, drop the
 * leading characters that also carry filler bits (0, 2 or 3 of them) and, when the value
 * does not end on a group boundary, the last character, which also carries bits of
 * whatever follows. What is left is the same whatever surrounds the value (the approach of
 * Sigma's base64offset modifier; GitHub's runner masks the trimmed forms for the same reason).
 */
export function base64Forms(bytes: Uint8Array): string[] {
  const out = new Set<string>();
  const std = Buffer.from(bytes).toString("base64");
  out.add(std);
  out.add(std.replace(/=+$/, ""));
  const url = Buffer.from(bytes).toString("base64url");
  out.add(url);
  out.add(url + "=".repeat((4 - (url.length % 4)) % 4));
  const dropStart = [0, 2, 3];
  for (let offset = 0; offset < 3; offset++) {
    const shifted = Buffer.concat([Buffer.alloc(offset), bytes]);
    let inner = shifted.toString("base64").replace(/=+$/, "").slice(dropStart[offset]);
    if (shifted.length % 3 !== 0) inner = inner.slice(0, -1);
    if (inner.length >= MIN_SECRET_LENGTH) {
      out.add(inner);
      out.add(inner.replaceAll("+", "-").replaceAll("/", "_"));
    }
  }
  return [...out];
}

function escapeRegex(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&");
}

function hexClass(c: string): string {
  return /[a-fA-F]/.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c;
}

/** Escapes `s`, matching the hex digits of its %XX and \uXXXX escapes in either case. */
function foldHex(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; ) {
    const pct = /^%[0-9A-Fa-f]{2}/.exec(s.slice(i, i + 3));
    if (pct !== null) {
      out += `%${hexClass(s[i + 1] as string)}${hexClass(s[i + 2] as string)}`;
      i += 3;
      continue;
    }
    const uni = /^\\u[0-9A-Fa-f]{4}/.exec(s.slice(i, i + 6));
    if (uni !== null) {
      out += "\\\\u";
      for (let j = 2; j < 6; j++) out += hexClass(s[i + j] as string);
      i += 6;
      continue;
    }
    out += escapeRegex(s[i] as string);
    i += 1;
  }
  return out;
}
