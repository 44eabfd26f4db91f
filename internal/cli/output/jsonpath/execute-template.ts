/**
 * Runs a parsed template over a document and returns the text, as kubectl prints
 * `-o jsonpath=…`: literal text as written; a path's values joined by one space (strings
 * as they are, numbers and booleans as JSON, objects and arrays as compact JSON); a range
 * repeats its body once per value its path selects, with `.`/`@` meaning that value (`$`
 * stays the document). No newline is added at the end (as kubectl: write {"\n"}).
 *
 * Must never print a control character from the data: values go through escapeControls
 * (ESC, C0/C1 controls, bidi overrides are escaped); only the template's own text is raw.
 */
import { escapeControls } from "../../terminal-safe.ts";
import { evaluatePath } from "./evaluate-path.ts";
import type { TemplateNode } from "./syntax.ts";

export function executeTemplate(nodes: TemplateNode[], root: unknown): string {
  return run(nodes, root, root);
}

function run(nodes: TemplateNode[], root: unknown, current: unknown): string {
  let out = "";
  for (const n of nodes) {
    if (n.t === "text") out += n.text;
    else if (n.t === "path") out += evaluatePath(n.path, root, current).map(valueText).join(" ");
    else for (const v of evaluatePath(n.path, root, current)) out += run(n.body, root, v);
  }
  return out;
}

/** One selected value as text (terminal-safe). */
export function valueText(v: unknown): string {
  if (typeof v === "string") return escapeControls(v);
  if (v === undefined) return "";
  return escapeControls(JSON.stringify(v) ?? "");
}
