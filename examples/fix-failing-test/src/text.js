/**
 * Small text helpers for labels in a terminal UI: no dependencies, plain Node.js.
 */

/**
 * Shortens `text` to at most `max` characters. A shortened text ends with "…" (one
 * character), which counts towards `max`, so a label never overflows its column.
 *
 * @param {string} text
 * @param {number} max  the width of the column, at least 1
 * @returns {string}
 */
export function truncate(text, max) {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}…`;
}

/**
 * A URL-friendly version of `text`: lower case, ASCII letters and digits, words joined
 * by single dashes ("Hello, World!" → "hello-world").
 *
 * @param {string} text
 * @returns {string}
 */
export function slugify(text) {
  return text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

/**
 * `text` with its first character in upper case.
 *
 * @param {string} text
 * @returns {string}
 */
export function capitalize(text) {
  return text.length === 0 ? text : text[0].toUpperCase() + text.slice(1);
}
