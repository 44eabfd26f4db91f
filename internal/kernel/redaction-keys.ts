/**
 * The key rule of redaction: `KEY=value`, `KEY: value`, `"key": "value"` (also `:=`, `=>`,
 * single quotes, JSON inside a JSON string) where the key contains one of the configured
 * names, case-insensitively: the value is redacted, an `Authorization: Bearer x` scheme
 * word is kept.
 *
 * Hand-written scanning (no regex but the one finding the names): it runs on every output.
 * It must never redact the key itself, only its value.
 */
import { AgentdError } from "../errors.ts";
import type { Span } from "./redaction-spans.ts";
import { escapeRegex } from "./secret-forms.ts";

export interface KeyFinder {
  /** Adds a span for the value of every configured key in `s`. */
  scan(s: string, spans: Span[]): void;
  /** True when an object key names a secret (contains a configured name). */
  isSecretKey(key: string): boolean;
}

/** A finder for `keys` (policy `redaction.keys`), or none when there are none. */
export function createKeyFinder(keys: readonly string[]): KeyFinder | undefined {
  const keyNames = keys.map((k, i) => {
    if (typeof k !== "string" || k.length === 0) {
      throw new AgentdError("EVALIDATION", `redaction.keys[${i}]: must be a non-empty string`, {
        field: `redaction.keys[${i}]`,
      });
    }
    return k.toLowerCase();
  });
  if (keyNames.length === 0) return undefined;
  const names = new RegExp([...new Set(keyNames)].map(escapeRegex).join("|"), "gi");
  return {
    isSecretKey(key) {
      const lower = key.toLowerCase();
      for (const name of keyNames) if (lower.includes(name)) return true;
      return false;
    },
    scan(s, spans) {
      // Find the configured names themselves (rare in ordinary output), then look around
      // each: the key is the whole run of key characters holding it, then a separator.
      names.lastIndex = 0;
      for (let m = names.exec(s); m !== null; m = names.exec(s)) {
        names.lastIndex = keyedValue(s, m.index, m.index + m[0].length, spans);
      }
    },
  };
}

/**
 * Looks around a name found at `s[at, after)`: pushes the span of the value of the key
 * holding it, if any, and answers where to look for the next name.
 */
function keyedValue(s: string, at: number, after: number, spans: Span[]): number {
  const len = s.length;
  let left = at;
  while (left > 0 && at - left <= MAX_KEY && isKeyChar(s.charCodeAt(left - 1))) left--;
  let right = after;
  while (right < len && isKeyChar(s.charCodeAt(right))) right++;
  // Every name in this run names the same key: skip the run. A run too long is a word.
  if (right - left > MAX_KEY) return right;
  let from = left;
  let next = right;
  let escaped = false;
  const q = s.charCodeAt(left - 1);
  if ((q === 34 || q === 39) && s.charCodeAt(right) === q) {
    from = left - 1;
    next = right + 1;
  } else if (
    q === 34 &&
    s.charCodeAt(left - 2) === 92 &&
    s.charCodeAt(right) === 92 &&
    s.charCodeAt(right + 1) === 34
  ) {
    from = left - 2; // JSON inside a JSON string: {\"password\":\"…\"}
    next = right + 2;
    escaped = true;
  }
  const v = valueAfter(s, next, escaped);
  if (v === undefined) return right;
  if (v.end > v.start) {
    spans.push({ start: v.start, end: v.end, from, open: !v.closed && v.end === len });
  }
  return Math.max(right, v.matchEnd);
}

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
