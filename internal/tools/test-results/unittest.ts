/**
 * Python unittest's text report (`python3 -m unittest`, `-v` or not): counts from "Ran N
 * tests" and the closing "OK (skipped=1)" / "FAILED (failures=2, errors=1, skipped=1)"
 * line; each "FAIL: name (module.Class.name)" / "ERROR: …" block gives a failure, its
 * location from the innermost traceback frame in a file of the workspace, its message
 * from the block's last line.
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const RAN = /^Ran (\d+) tests? in [\d.]+s$/gm;
const CLOSING = /^(OK|FAILED)(?: \(([^)]*)\))?$/gm;
const HEAD = /^(FAIL|ERROR|UNEXPECTED SUCCESS): (.+)$/;
const FRAME = /^ {2}File "([^"]+)", line (\d+)/;
const RULE = /^(?:={20,}|-{20,})$/;

export function looksLikeUnittest(text: string): boolean {
  return /^Ran \d+ tests? in [\d.]+s$/m.test(text);
}

export function parseUnittest(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const ran = [...text.matchAll(RAN)].at(-1);
  if (ran === undefined) return undefined;
  const total = Number(ran[1]);
  const closing = [...text.matchAll(CLOSING)].at(-1);
  const n = { failures: 0, errors: 0, skipped: 0, expected_failures: 0, unexpected_successes: 0 };
  for (const part of (closing?.[2] ?? "").split(", ")) {
    const [k, v] = part.split("=");
    if (k !== undefined && k in n) n[k as keyof typeof n] = Number(v) || 0;
  }
  const out = collectSummary("unittest");
  for (const b of blocks(text)) out.fail(b);
  const failed = n.failures + n.unexpected_successes;
  const skipped = n.skipped + n.expected_failures;
  return out.done({
    // Subtests can fail more than once per test: passed never goes below zero.
    passed: Math.max(0, total - failed - n.errors - skipped),
    failed,
    skipped,
    errors: n.errors,
  });
}

interface Block {
  name: string;
  file: string;
  line: number;
  message: string;
}

function blocks(text: string): Block[] {
  const lines = text.split("\n");
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^={20,}$/.test(lines[i] ?? "")) continue;
    const h = HEAD.exec(lines[i + 1] ?? "");
    if (h === null) continue;
    const b: Block = { name: h[2] ?? "", file: "", line: 0, message: "" };
    let j = i + 3; // the head, then a rule of dashes
    const body: string[] = [];
    for (; j < lines.length && !RULE.test(lines[j] ?? ""); j++) body.push(lines[j] ?? "");
    for (const l of body) {
      const f = FRAME.exec(l);
      // The innermost frame outside the standard library and site-packages.
      if (f !== null && !/\/(?:lib\/python[\d.]+|site-packages)\//.test(f[1] ?? "")) {
        b.file = f[1] ?? "";
        b.line = Number(f[2]);
      }
    }
    b.message = body.filter((l) => l.trim() !== "").at(-1) ?? "";
    out.push(b);
    i = j - 1;
  }
  return out;
}
