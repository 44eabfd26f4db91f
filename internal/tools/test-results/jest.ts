/**
 * Jest's default reporter (printed on stderr): counts from the closing "Tests: 2 failed,
 * 1 skipped, 2 passed, 5 total" line, a failure per "● Suite › test" block — its message
 * up to the code frame, its location from the first stack frame in the file the block's
 * "FAIL path" header names — and an error per "● Test suite failed to run".
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const TESTS = /^Tests:[ \t]+(.*?),? (\d+) total$/m;
const FILE = /^(?:FAIL|PASS) (\S+)/;
const BLOCK = /^ {2}● (.+)$/;
const FRAME = /^\s+at (?:.*\()?([^\s()]+):(\d+):\d+\)?$/;
const CODE = /^\s+>?\s*\d+ \|/;

export function looksLikeJest(text: string): boolean {
  return /^Tests:[ \t]+.*(?<!\d)\d+ total$/m.test(text) && /^Test Suites:/m.test(text);
}

export function parseJest(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const totals = [...text.matchAll(new RegExp(TESTS.source, "gm"))].at(-1);
  if (totals === undefined) return undefined;
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  for (const part of (totals[1] ?? "").split(", ")) {
    const [n, word] = part.trim().split(" ");
    if (word === "passed") counts.passed += Number(n) || 0;
    else if (word === "failed") counts.failed += Number(n) || 0;
    else if (word === "skipped" || word === "todo") counts.skipped += Number(n) || 0;
  }
  const out = collectSummary("jest");
  const lines = text.split("\n");
  let file = "";
  for (let i = 0; i < lines.length; i++) {
    const f = FILE.exec(lines[i] ?? "");
    if (f !== null) file = (f[1] ?? "").replace(/^\.\//, "");
    const b = BLOCK.exec(lines[i] ?? "");
    if (b === null) continue;
    const title = (b[1] ?? "").trim();
    const message: string[] = [];
    let loc: { file: string; line: number } | undefined;
    let j = i + 1;
    let inMessage = true;
    for (; j < lines.length && !BLOCK.test(lines[j] ?? "") && !FILE.test(lines[j] ?? ""); j++) {
      const l = lines[j] ?? "";
      if (CODE.test(l)) inMessage = false;
      const fr = FRAME.exec(l);
      if (fr !== null) {
        inMessage = false;
        // The test file's own frame, else the first outside node_modules.
        const at = (fr[1] ?? "").replace(/^\/workspace\//, "");
        const better =
          loc === undefined ? !at.includes("node_modules/") : at === file && loc.file !== file;
        if (better) loc = { file: at, line: Number(fr[2]) };
      } else if (inMessage && message.length < 40) message.push(l.trim());
    }
    if (title === "Test suite failed to run") {
      counts.errors++;
      const line = loc?.file === file ? loc.line : 0;
      out.fail({ name: file || title, file, line, message: message.join("\n").trim() });
    } else {
      out.fail({
        name: title,
        file: loc?.file ?? file,
        line: loc?.line ?? 0,
        message: message.join("\n").trim(),
      });
    }
    i = j - 1;
  }
  return out.done(counts);
}
