/**
 * Head-and-tail cuts: long text keeps its start and its end (where a command says what it
 * is doing and where it failed) around a marker saying how much was left out; long arrays
 * keep their first and last items. Used to fit content into one event.
 *
 * Never splits a UTF-16 surrogate pair (a cut never makes a lone surrogate), never cuts a
 * value that is already short enough, never turns an own `__proto__` key into a prototype.
 * (Strings of a JSON document may hold lone surrogates: canonical JSON escapes them.)
 */

/** The marker put where content was left out, given how much: UTF-8 bytes of text, or items. */
export type CutNote = (omitted: number, unit: "bytes" | "items") => string;

/** Items an array keeps per character of `keep`: a kept item is assumed to cost ~64 characters. */
const CHARS_PER_ITEM = 64;

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/**
 * `text` when it has at most `keep` UTF-16 units; otherwise its first and last `keep / 2`
 * units around `note(omittedBytes)`.
 */
export function headTail(text: string, keep: number, note: CutNote): string {
  if (text.length <= keep) return text;
  let head = Math.max(0, Math.floor(keep / 2));
  if (head > 0 && isHigh(text.charCodeAt(head - 1))) head--;
  let tail = text.length - Math.max(0, keep - Math.floor(keep / 2));
  if (tail < text.length && isLow(text.charCodeAt(tail))) tail++;
  const omitted = Buffer.byteLength(text.slice(head, tail));
  return `${text.slice(0, head)}${note(omitted, "bytes")}${text.slice(tail)}`;
}

/** A plain marker for short fields (reasons, messages, names): "[agentd: N bytes left out]". */
export const plainNote: CutNote = (n, unit) => ` [agentd: ${n} ${unit} left out] `;

/**
 * `text` cut to about `max` units with a plain marker (for reasons, messages and names),
 * and well-formed: a lone surrogate (from a model's input) becomes U+FFFD, because an event
 * holding one cannot be decoded (protobuf strings must be valid UTF-8).
 */
export function clipText(text: string, max: number): string {
  return headTail(text, max, plainNote).toWellFormed();
}

/**
 * A copy of a JSON-like value with every string longer than `keep` cut by headTail and every
 * array longer than `keep / 64` items (at least 2) cut to its first and last items around a
 * marker item. Keys, numbers, booleans and null are kept as they are.
 */
export function cutTree(value: unknown, keep: number, note: CutNote): unknown {
  if (typeof value === "string") return headTail(value, keep, note);
  if (Array.isArray(value)) {
    const max = Math.max(2, Math.floor(keep / CHARS_PER_ITEM));
    const head = Math.ceil(max / 2);
    const kept =
      value.length <= max
        ? value
        : [
            ...value.slice(0, head),
            note(value.length - max, "items"),
            ...value.slice(value.length - (max - head)),
          ];
    return kept.map((v) => cutTree(v, keep, note));
  }
  if (value !== null && typeof value === "object") {
    // fromEntries defines own properties: a "__proto__" key stays a key.
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, cutTree(v, keep, note)] as const),
    );
  }
  return value;
}

/**
 * The largest `keep` that changes anything in `value`: its longest string, or 64 characters
 * per item of its longest array. Above it, cutTree is the identity.
 */
export function treeExtent(value: unknown): number {
  if (typeof value === "string") return value.length;
  if (Array.isArray(value)) {
    let m = value.length * CHARS_PER_ITEM;
    for (const v of value) m = Math.max(m, treeExtent(v));
    return m;
  }
  if (value !== null && typeof value === "object") {
    let m = 0;
    for (const v of Object.values(value)) m = Math.max(m, treeExtent(v));
    return m;
  }
  return 0;
}
