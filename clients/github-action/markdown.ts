/**
 * Text that came from a run (the prompt, the model's commands, paths, reasons, its final
 * message, error messages) made inert for a GitHub job summary, which renders GitHub
 * Flavored Markdown with inline HTML.
 *
 * Must never: let such text open a link, an image, a heading, a table cell, an HTML
 * element or a code span, close the element it is put in, or mention a person. Every
 * ASCII character other than a letter, a digit or a space becomes a numeric character
 * reference (`|` is `&#124;`), which Markdown shows as the character and never reads as
 * syntax; control characters and bidirectional overrides become U+FFFD.
 */

/** Characters that could reorder what a reader sees (Trojan Source) or hide text. */
const HIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

function scrub(text: string): string {
  return text.replace(HIDDEN, "\ufffd");
}

/** Cuts `text` to at most `max` code points, marking the cut with "…". */
export function clip(text: string, max: number): string {
  const points = Array.from(text);
  return points.length <= max ? text : `${points.slice(0, max - 1).join("")}…`;
}

function encodeAscii(text: string): string {
  let out = "";
  for (const ch of text) {
    const c = ch.codePointAt(0) as number;
    if (c < 0x80 && !/[A-Za-z0-9 ]/.test(ch)) {
      out += `&#${c};`;
      // "@name" would link (and on some pages notify) a person: a zero-width space breaks it.
      if (ch === "@") out += "&#8203;";
    } else out += ch;
  }
  return out;
}

/**
 * One line of inert inline text, for a table cell or after a label: line breaks become
 * " ⏎ ", runs of spaces one space, at most `max` code points (default 160).
 */
export function inline(text: string, max = 160): string {
  const flat = scrub(text.replace(/\r\n?|\n/g, " ⏎ ").replace(/\t/g, " "))
    .replace(/ {2,}/g, " ")
    .trim();
  return encodeAscii(clip(flat, max));
}

/**
 * Inert multi-line text as an HTML `<pre>` block (line breaks kept, at most `max` code
 * points, default 4000). Inside `<pre>` GitHub reads no Markdown, and with `<`, `&` and
 * every other punctuation encoded the text cannot end the block.
 */
export function preBlock(text: string, max = 4000): string {
  const lines = scrub(clip(text.replace(/\r\n?/g, "\n"), max).replace(/\t/g, "  ")).split("\n");
  return `<pre>${lines.map(encodeAscii).join("\n")}</pre>`;
}

/**
 * An http(s) URL for a Markdown link target, or undefined when `raw` is not one. Spaces,
 * quotes, angle brackets and parentheses are percent-encoded so the target cannot end early.
 */
export function linkTarget(raw: string): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
  return u.href.replace(
    /[()<>"' `\\|[\]]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`,
  );
}
