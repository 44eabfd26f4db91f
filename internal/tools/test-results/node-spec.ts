/**
 * node --test's spec reporter (its default when stdout is not a terminal, as in a
 * sandbox): counts from the closing "ℹ pass N" / "ℹ fail N" … lines, failures from the
 * "✖ failing tests:" section ("test at file:line:col", "✖ name (duration)", then the
 * error up to its stack).
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const COUNT = /^ℹ (tests|pass|fail|cancelled|skipped|todo) (\d+)$/gm;

export function looksLikeNodeSpec(text: string): boolean {
  return /^ℹ tests \d+$/m.test(text) && /^ℹ pass \d+$/m.test(text);
}

export function parseNodeSpec(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const n = new Map<string, number>();
  for (const m of text.matchAll(COUNT)) n.set(m[1] ?? "", Number(m[2]));
  if (!n.has("pass") && !n.has("fail")) return undefined;
  const out = collectSummary("node-spec");
  const at = text.lastIndexOf("\n✖ failing tests:");
  if (at >= 0) {
    const lines = text.slice(at).split("\n");
    for (let i = 0; i < lines.length; i++) {
      const loc = /^test at (.*?):(\d+):\d+$/.exec(lines[i] ?? "");
      const head = /^✖ (.*?)(?: \([\d.]+m?s\))?$/.exec(lines[i + 1] ?? "");
      if (loc === null || head === null) continue;
      const msg: string[] = [];
      for (let j = i + 2; j < lines.length && msg.length < 40; j++) {
        const l = lines[j] ?? "";
        if (/^\s+at /.test(l) || /^test at /.test(l) || /^\S/.test(l)) break;
        msg.push(l.trim());
      }
      out.fail({
        name: head[1] ?? "",
        file: loc[1] ?? "",
        line: Number(loc[2]),
        message: msg.join("\n").trim(),
      });
      i++;
    }
  }
  return out.done({
    passed: n.get("pass") ?? 0,
    failed: (n.get("fail") ?? 0) + (n.get("cancelled") ?? 0),
    skipped: (n.get("skipped") ?? 0) + (n.get("todo") ?? 0),
    errors: 0,
  });
}
