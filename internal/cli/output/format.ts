/**
 * The value of agentctl's `-o/--output` flag: `json`, `yaml`, `name` or
 * `jsonpath=TEMPLATE` (kubectl's names and template syntax), parsed once before any request
 * so that a mistake costs nothing. An unknown name lists the accepted ones (and the nearest,
 * "did you mean json?"); a malformed template names the character and the problem. Both
 * are usage errors (exit 64). It must never guess a format the user did not write.
 */
import { UsageError } from "../client.ts";
import { didYouMean } from "../suggest.ts";
import { parseTemplate } from "./jsonpath/parse-template.ts";
import { JsonPathError, type TemplateNode } from "./jsonpath/syntax.ts";

export type OutputFormat =
  | { kind: "json" }
  | { kind: "yaml" }
  | { kind: "name" }
  | { kind: "jsonpath"; template: string; nodes: TemplateNode[] };

/** The formats as --help and error messages name them. */
export const OUTPUT_FORMATS = "json, yaml, name or jsonpath=TEMPLATE";

const NAMES = ["json", "yaml", "name", "jsonpath"] as const;

export function parseOutputFormat(raw: string, command?: string): OutputFormat {
  // -o=json reaches here as "=json" (node's parseArgs keeps the "=" of a short flag).
  const value = raw.startsWith("=") ? raw.slice(1) : raw;
  const eq = value.indexOf("=");
  const name = eq < 0 ? value : value.slice(0, eq);
  if (name === "") throw new UsageError(`--output needs a format: ${OUTPUT_FORMATS}`, command);
  if (name === "jsonpath") {
    const template = eq < 0 ? "" : value.slice(eq + 1);
    if (template === "")
      throw new UsageError(
        `--output jsonpath needs a template after "=", e.g. -o jsonpath='{.runId}'`,
        command,
      );
    return { kind: "jsonpath", template, nodes: parseOrExplain(template, command) };
  }
  if (eq < 0 && (name === "json" || name === "yaml" || name === "name")) return { kind: name };
  if (eq >= 0 && NAMES.includes(name as (typeof NAMES)[number]))
    throw new UsageError(`--output ${name} takes no "=…" (only jsonpath=TEMPLATE does)`, command);
  throw new UsageError(
    `unknown --output format ${JSON.stringify(name)}: use ${OUTPUT_FORMATS}${didYouMean(name, NAMES)}`,
    command,
  );
}

function parseOrExplain(template: string, command: string | undefined): TemplateNode[] {
  try {
    return parseTemplate(template);
  } catch (err) {
    if (!(err instanceof JsonPathError)) throw err;
    // A caret under the character, when the template shows on one line as typed.
    const plain = /^[\x20-\x7e]*$/.test(template);
    const pointer = plain ? `\n  ${template}\n  ${" ".repeat(err.position - 1)}^` : "";
    throw new UsageError(
      `--output jsonpath: ${err.problem} at character ${err.position} of the template${pointer}`,
      command,
    );
  }
}

/**
 * The command's output format from its flags: undefined without -o (the human text).
 * `--json`, where a command has it, keeps its older form and cannot be combined with -o.
 */
export function outputFormatOf(
  values: Record<string, unknown>,
  command: string,
): OutputFormat | undefined {
  const raw = values.output;
  if (typeof raw !== "string") return undefined;
  if (values.json === true)
    throw new UsageError("give --json or --output, not both (--json is the older form)", command);
  return parseOutputFormat(raw, command);
}
