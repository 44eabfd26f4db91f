/**
 * TAP (13 and 14, with indented subtests as node --test --test-reporter=tap prints them):
 * counts from the producer's "# pass N" / "# fail N" … comments when it prints them (node
 * does), else from the leaf test points (a point whose subtests precede it is a parent);
 * a failure per failing leaf ("not ok", not # TODO), its location and message from its
 * YAML block (node's `location: 'file:line:col'` and `error:`; `at:`/`file:`/`line:` and
 * `message:` of other producers). "Bail out!" counts as an error.
 *
 * Pure and bounded (summary.ts). Never evaluates YAML: it reads a few scalar keys as text.
 * Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const POINT = /^(\s*)(not ok|ok)\b(?:\s+\d+)?(?:\s*-)?\s*(.*)$/;
const DIRECTIVE = /\s#\s*(SKIP|TODO)\b[^\n]*$/i;

export function looksLikeTap(text: string): boolean {
  return (
    /^TAP version 1[34]$/m.test(text) ||
    (/^[ \t]*1\.\.\d+/m.test(text) && /^[ \t]*(?:not )?ok \d+/m.test(text))
  );
}

interface Point {
  indent: number;
  ok: boolean;
  name: string;
  directive: string;
  yaml: string[];
}

export function parseTap(output: string): TestSummary | undefined {
  const lines = boundInput(stripEscapes(output)).split("\n");
  const points: Point[] = [];
  let bail = 0;
  let inYaml: Point | undefined;
  const comments = new Map<string, number>();
  for (const line of lines) {
    if (inYaml !== undefined) {
      if (/^\s*\.\.\.\s*$/.test(line)) inYaml = undefined;
      else if (inYaml.yaml.length < 200) inYaml.yaml.push(line);
      continue;
    }
    if (/^\s*---\s*$/.test(line) && points.length > 0) {
      inYaml = points[points.length - 1];
      continue;
    }
    const c = /^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(line);
    if (c !== null) comments.set(c[1] ?? "", Number(c[2]));
    if (/^\s*Bail out!/.test(line)) bail++;
    const m = POINT.exec(line);
    if (m === null) continue;
    const rest = m[3] ?? "";
    const d = DIRECTIVE.exec(rest);
    points.push({
      indent: (m[1] ?? "").length,
      ok: m[2] === "ok",
      name: (d === null ? rest : rest.slice(0, d.index)).trim(),
      directive: (d?.[1] ?? "").toUpperCase(),
      yaml: [],
    });
  }
  if (points.length === 0 && comments.size === 0) return undefined;
  const out = collectSummary("tap");
  const counts = { passed: 0, failed: 0, skipped: 0, errors: bail };
  points.forEach((p, i) => {
    const prev = points[i - 1];
    if (prev !== undefined && prev.indent > p.indent) return; // a parent: its subtests count
    if (p.directive !== "") counts.skipped++;
    else if (p.ok) counts.passed++;
    else {
      counts.failed++;
      out.fail({ name: p.name, ...yamlDetail(p.yaml) });
    }
  });
  if (comments.has("pass") || comments.has("fail")) {
    counts.passed = comments.get("pass") ?? 0;
    counts.failed = (comments.get("fail") ?? 0) + (comments.get("cancelled") ?? 0);
    counts.skipped = (comments.get("skipped") ?? 0) + (comments.get("todo") ?? 0);
  }
  return out.done(counts);
}

/** file, line and message from a point's YAML block, read as text. */
function yamlDetail(yaml: string[]): { file: string; line: number; message: string } {
  let file = "";
  let line = 0;
  let message = "";
  for (let i = 0; i < yaml.length; i++) {
    const m = /^(\s*)(location|at|file|line|error|message):\s?(.*)$/.exec(yaml[i] ?? "");
    if (m === null) continue;
    const [, indent = "", key, raw = ""] = m;
    const value = unquote(raw.trim());
    if (key === "location" || key === "at") {
      const loc = /^(.*?):(\d+)(?::\d+)?$/.exec(value);
      if (loc !== null) {
        file = loc[1] ?? "";
        line = Number(loc[2]);
      }
    } else if (key === "file" && file === "") file = value;
    else if (key === "line" && line === 0) line = Number(value) || 0;
    else if (message === "") {
      if (/^[|>][-+]?$/.test(value)) {
        const block: string[] = [];
        for (let j = i + 1; j < yaml.length; j++) {
          const l = yaml[j] ?? "";
          if (l.trim() !== "" && l.length - l.trimStart().length <= indent.length) break;
          block.push(l.trim());
        }
        message = block.join("\n").trim();
      } else message = value;
    }
  }
  return { file, line, message };
}

function unquote(s: string): string {
  if (s.length >= 2 && s.startsWith("'") && s.endsWith("'"))
    return s.slice(1, -1).replace(/''/g, "'");
  if (s.length >= 2 && s.startsWith('"') && s.endsWith('"')) return s.slice(1, -1);
  return s;
}
