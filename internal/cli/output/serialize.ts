/**
 * The JSON and YAML texts of `-o json` and `-o yaml`. Both escape what a terminal would
 * act on: JSON.stringify escapes C0 controls but leaves DEL, C1 controls (8-bit CSI) and
 * bidi overrides raw, and the yaml package double-quotes such strings without escaping
 * them, so those are written as `\uNNNN` here; the result still parses to the same value.
 *
 * Must never change a value: parsing the text gives back exactly the document.
 */
import { Document, isScalar, visit } from "yaml";
import { UNSAFE_CHARS } from "../terminal-safe.ts";

function uEscape(c: string): string {
  return `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`;
}

/** Indented JSON (2 spaces) and a newline. */
export function jsonText(doc: unknown): string {
  // Outside strings JSON text holds no such character: every one is inside a string.
  return `${JSON.stringify(doc, null, 2).replace(UNSAFE_CHARS, uEscape)}\n`;
}

/** Block-style YAML, no line folding. */
export function yamlText(doc: unknown): string {
  const d = new Document(doc);
  const unsafe = new RegExp(UNSAFE_CHARS.source);
  // A string holding an unsafe character is double-quoted, where \uNNNN is an escape.
  visit(d, {
    Scalar(_key, node) {
      if (isScalar(node) && typeof node.value === "string" && unsafe.test(node.value))
        node.type = "QUOTE_DOUBLE";
    },
  });
  return d.toString({ lineWidth: 0 }).replace(UNSAFE_CHARS, uEscape);
}
