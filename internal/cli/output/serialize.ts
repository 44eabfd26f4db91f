/**
 * The JSON and YAML texts of `-o json`, `-o yaml` and `--json`. Both escape what a terminal
 * would act on or hide: JSON.stringify escapes C0 controls but leaves DEL, C1 controls
 * (8-bit CSI), bidi controls and zero-width characters raw, and the yaml package
 * double-quotes such strings without escaping them, so every character of
 * internal/text/hidden-chars.ts is written as `\uNNNN` here (a surrogate pair beyond the
 * BMP; YAML's `\UNNNNNNNN`); the result still parses to the same value.
 *
 * Must never change a value: parsing the text gives back exactly the document.
 */
import { Document, isScalar, visit } from "yaml";
import { UNSAFE_CHARS, UNSAFE_SOURCE } from "../terminal-safe.ts";

function u4(n: number): string {
  return `\\u${n.toString(16).padStart(4, "0")}`;
}

/** A JSON string escape: `\uNNNN`, or two of them (UTF-16 surrogates) beyond the BMP. */
function jsonEscape(c: string): string {
  return c.length === 1 ? u4(c.charCodeAt(0)) : u4(c.charCodeAt(0)) + u4(c.charCodeAt(1));
}

/** A YAML double-quoted escape: `\uNNNN`, or `\UNNNNNNNN` beyond the BMP. */
function yamlEscape(c: string): string {
  const n = c.codePointAt(0) ?? 0;
  return n < 0x10000 ? u4(n) : `\\U${n.toString(16).padStart(8, "0")}`;
}

/**
 * JSON text (any serializer's output: JSON.stringify, canonicalJson) with the unsafe
 * characters escaped. Outside strings JSON text holds no such character (its whitespace is
 * space, tab, newline and CR, and stringify emits no raw CR), so every one is inside a string.
 */
export function safeJson(text: string): string {
  return text.replace(UNSAFE_CHARS, jsonEscape);
}

/** Indented JSON (2 spaces) and a newline. */
export function jsonText(doc: unknown): string {
  return `${safeJson(JSON.stringify(doc, null, 2))}\n`;
}

/** One line of NDJSON (`--json`): compact JSON and a newline. */
export function jsonLine(doc: unknown): string {
  return `${safeJson(JSON.stringify(doc))}\n`;
}

/** Block-style YAML, no line folding. */
export function yamlText(doc: unknown): string {
  const d = new Document(doc);
  const unsafe = new RegExp(UNSAFE_SOURCE, "u");
  // A string holding an unsafe character is double-quoted, where \uNNNN is an escape.
  visit(d, {
    Scalar(_key, node) {
      if (isScalar(node) && typeof node.value === "string" && unsafe.test(node.value))
        node.type = "QUOTE_DOUBLE";
    },
  });
  return d.toString({ lineWidth: 0 }).replace(UNSAFE_CHARS, yamlEscape);
}
