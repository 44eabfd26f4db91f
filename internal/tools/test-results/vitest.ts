/**
 * Vitest's default reporter (summary on stdout, failures on stderr): counts from the
 * "Tests  2 failed | 1 passed | 1 skipped (4)" line (and "Errors  N errors" for unhandled
 * errors), a failure per " FAIL  file > suite > test" block of the failed-tests section —
 * its first line the message, its " ❯ file:line:col" the location.
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const TESTS = /^[ \t]*Tests[ \t]+(.+?)[ \t]+\((\d+)\)$/gm;
const ERRORS = /^[ \t]*Errors[ \t]+(\d+) errors?\b/m;
const FAIL = /^ FAIL {1,2}(.+)$/;
const AT = /^\s*❯ (\S+?):(\d+):\d+$/;
const RULE = /^⎯+/;

export function looksLikeVitest(text: string): boolean {
  return (
    /^[ \t]*Test Files[ \t]+.*\(\d+\)$/m.test(text) && /^[ \t]*Tests[ \t]+.*\(\d+\)$/m.test(text)
  );
}

export function parseVitest(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const totals = [...text.matchAll(TESTS)].at(-1);
  if (totals === undefined) return undefined;
  const counts = { passed: 0, failed: 0, skipped: 0, errors: Number(ERRORS.exec(text)?.[1] ?? 0) };
  for (const part of (totals[1] ?? "").split("|")) {
    const [n, word] = part.trim().split(" ");
    if (word === "passed") counts.passed += Number(n) || 0;
    else if (word === "failed") counts.failed += Number(n) || 0;
    else if (word === "skipped" || word === "todo") counts.skipped += Number(n) || 0;
  }
  const out = collectSummary("vitest");
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const f = FAIL.exec(lines[i] ?? "");
    if (f === null) continue;
    const title = (f[1] ?? "").trim();
    let message = "";
    let loc: { file: string; line: number } | undefined;
    let j = i + 1;
    for (; j < lines.length && !FAIL.test(lines[j] ?? "") && !RULE.test(lines[j] ?? ""); j++) {
      const l = lines[j] ?? "";
      const at = AT.exec(l);
      if (at !== null && loc === undefined) loc = { file: at[1] ?? "", line: Number(at[2]) };
      else if (message === "" && l.trim() !== "") message = l.trim();
    }
    const file = title.split(" > ")[0] ?? "";
    out.fail({ name: title, file: loc?.file ?? file, line: loc?.line ?? 0, message });
    i = j - 1;
  }
  return out.done(counts);
}
