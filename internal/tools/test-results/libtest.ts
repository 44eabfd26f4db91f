/**
 * Rust's libtest text output (`cargo test`, one block per test binary): counts summed over
 * every "test result: … N passed; N failed; N ignored …" line, a failure per "---- name
 * stdout ----" section with the panic's location and message ("thread 'x' panicked at
 * src/lib.rs:11:23:" then the message; the older "panicked at 'msg', file:line:col" too),
 * and an error per crate that did not compile (the first error and its "-->" location).
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const RESULT =
  /^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; (\d+) filtered out/gm;
const FAILED_LINE = /^test (\S+) \.\.\. FAILED$/gm;
const SECTION = /^---- (\S+) stdout ----$/;
const PANIC_NEW = /^thread '[^']*'(?: \(\d+\))? panicked at ([^:\s]+):(\d+):\d+:$/;
const PANIC_OLD = /^thread '[^']*'(?: \(\d+\))? panicked at '(.*)', ([^:\s]+):(\d+):\d+$/;
const COMPILE = /^error: could not compile `([^`]+)`/gm;

export function looksLikeLibtest(text: string): boolean {
  return (
    /^test result: (?:ok|FAILED)\. \d+ passed;/m.test(text) ||
    /^error: could not compile `/m.test(text)
  );
}

export function parseLibtest(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  let seen = false;
  for (const m of text.matchAll(RESULT)) {
    seen = true;
    counts.passed += Number(m[1]);
    counts.failed += Number(m[2]);
    counts.skipped += Number(m[3]);
  }
  const out = collectSummary("libtest");
  const sections = readSections(text);
  const named = new Set<string>();
  for (const m of text.matchAll(FAILED_LINE)) {
    const name = m[1] ?? "";
    if (named.has(name)) continue;
    named.add(name);
    out.fail({ name, ...(sections.get(name) ?? {}) });
  }
  for (const m of text.matchAll(COMPILE)) {
    seen = true;
    counts.errors++;
    out.fail({ name: `compile ${m[1]}`, ...firstCompileError(text) });
  }
  return seen ? out.done(counts) : undefined;
}

function readSections(text: string): Map<string, { file: string; line: number; message: string }> {
  const out = new Map<string, { file: string; line: number; message: string }>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const s = SECTION.exec(lines[i] ?? "");
    if (s === null) continue;
    for (
      let j = i + 1;
      j < lines.length && !SECTION.test(lines[j] ?? "") && !/^failures:$/.test(lines[j] ?? "");
      j++
    ) {
      const l = lines[j] ?? "";
      const n = PANIC_NEW.exec(l);
      if (n !== null) {
        const msg: string[] = [];
        for (let k = j + 1; k < lines.length && msg.length < 20; k++) {
          const m = lines[k] ?? "";
          if (m === "" || m.startsWith("stack backtrace:") || m.startsWith("note: ")) break;
          msg.push(m);
        }
        out.set(s[1] ?? "", { file: n[1] ?? "", line: Number(n[2]), message: msg.join("\n") });
        break;
      }
      const o = PANIC_OLD.exec(l);
      if (o !== null) {
        out.set(s[1] ?? "", { file: o[2] ?? "", line: Number(o[3]), message: o[1] ?? "" });
        break;
      }
    }
  }
  return out;
}

function firstCompileError(text: string): { file: string; line: number; message: string } {
  const m = /^error(?:\[E\d+\])?: (.*)\n\s*--> ([^:\s]+):(\d+):\d+/m.exec(text);
  if (m === null) return { file: "", line: 0, message: "the crate did not compile" };
  return { file: m[2] ?? "", line: Number(m[3]), message: m[1] ?? "" };
}
