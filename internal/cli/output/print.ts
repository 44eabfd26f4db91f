/**
 * Prints resources in an `-o` format: one resource is its protobuf-JSON object; a list is
 * `{"items": [...]}` (kubectl's List shape, so `{.items[*].runId}` and
 * `{range .items[*]}…{end}` work as they do with kubectl), with `nextPageToken` when the
 * server has more. `-o name` prints `KIND/ID` one per line (`run/01J…`, `approval/apr_…`).
 *
 * Must never print a value unescaped: json and yaml escape in their syntax (serialize.ts),
 * name and jsonpath through escapeControls.
 */
import { escapeControls } from "../terminal-safe.ts";
import type { OutputFormat } from "./format.ts";
import { executeTemplate } from "./jsonpath/execute-template.ts";
import { jsonText, yamlText } from "./serialize.ts";

/** A resource to print: its kind and id (for -o name) and its JSON form. */
export interface Resource {
  /** "run", "approval", "event", "context", "principal". */
  kind: string;
  id: string;
  json: unknown;
}

function render(f: OutputFormat, doc: unknown, names: string[]): string {
  switch (f.kind) {
    case "json":
      return jsonText(doc);
    case "yaml":
      return yamlText(doc);
    case "name":
      return names.map((n) => `${escapeControls(n)}\n`).join("");
    case "jsonpath":
      return executeTemplate(f.nodes, doc);
  }
}

function nameOf(r: Resource): string {
  return `${r.kind}/${r.id}`;
}

/** One resource in format `f`. */
export function formatResource(f: OutputFormat, r: Resource): string {
  return render(f, r.json, [nameOf(r)]);
}

/** A list of resources in format `f` (`{"items": [...]}`; `nextPageToken` when more remain). */
export function formatList(f: OutputFormat, items: Resource[], nextPageToken = ""): string {
  const doc: Record<string, unknown> = { items: items.map((r) => r.json) };
  if (nextPageToken !== "") doc.nextPageToken = nextPageToken;
  return render(f, doc, items.map(nameOf));
}
