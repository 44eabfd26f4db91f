/**
 * pytest's printed output (its default terminal report, any -r flags, -q or not): counts
 * from the final "3 failed, 1 passed … in 0.03s" line, failures from the "short test
 * summary info" lines (FAILED/ERROR nodeid - message) completed by their sections in the
 * FAILURES/ERRORS blocks (the last "file.py:LINE: Error" line, the "E   " lines).
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const FINAL =
  /^(?:=+ )?((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?|rerun)(?:, )?)+) in [\d.]+s\b.*$/gm;
const SHORT = /^(FAILED|ERROR) (\S+)(?: - (.*))?$/gm;
const SECTION = /^_{3,} (.+?) _{3,}$/;
const LOCATION = /^(\S+\.py):(\d+): \S/;

/** True when `text` looks like pytest's report. */
export function looksLikePytest(text: string): boolean {
  return (
    /^=+ test session starts =+$/m.test(text) ||
    /^(?:=+ )?\d+ (?:passed|failed|errors?)\b.* in [\d.]+s\b/m.test(text)
  );
}

export function parsePytest(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const finals = [...text.matchAll(FINAL)];
  const last = finals.at(-1);
  if (last === undefined) return undefined;
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  for (const part of (last[1] ?? "").split(", ")) {
    const [n, word] = part.split(" ");
    const k = Number(n);
    if (word === "passed" || word === "xpassed") counts.passed += k;
    else if (word === "failed") counts.failed += k;
    else if (word === "skipped" || word === "xfailed") counts.skipped += k;
    else if (word === "error" || word === "errors") counts.errors += k;
  }
  const sections = readSections(text);
  const out = collectSummary("pytest");
  const shorts = [...text.matchAll(SHORT)];
  for (const m of shorts) {
    const nodeid = m[2] ?? "";
    const key = sectionKey(nodeid);
    const s = sections.get(m[1] === "ERROR" ? `ERROR:${key}` : key) ?? sections.get(key);
    const file = nodeid.includes("::") ? nodeid.slice(0, nodeid.indexOf("::")) : nodeid;
    out.fail({
      name: nodeid,
      file: s?.file ?? file,
      line: s?.line ?? 0,
      message: s?.message || (m[3] ?? ""),
    });
  }
  if (shorts.length === 0)
    for (const [key, s] of sections)
      out.fail({
        name: key.replace(/^ERROR:/, ""),
        file: s.file,
        line: s.line,
        message: s.message,
      });
  return out.done(counts);
}

interface Section {
  file: string;
  line: number;
  message: string;
}

/** "tests/test_x.py::TestA::test_b[1]" → "TestA.test_b[1]", the title of its section. */
function sectionKey(nodeid: string): string {
  const parts = nodeid.split("::");
  return parts.length > 1 ? parts.slice(1).join(".") : nodeid;
}

/** The sections of the FAILURES and ERRORS blocks, by title ("ERROR:" + name for errors). */
function readSections(text: string): Map<string, Section> {
  const out = new Map<string, Section>();
  let title: string | undefined;
  let cur: Section = { file: "", line: 0, message: "" };
  const close = () => {
    if (title !== undefined && !out.has(title)) out.set(title, cur);
  };
  for (const line of text.split("\n")) {
    if (/^=+ .* =+$/.test(line)) {
      close();
      title = undefined;
      continue;
    }
    const h = SECTION.exec(line);
    if (h !== null) {
      close();
      const t = h[1] ?? "";
      const err = /^ERROR (?:at (?:setup|teardown) of|collecting) (.+)$/.exec(t);
      title = err === null ? t : `ERROR:${err[1]}`;
      cur = { file: "", line: 0, message: "" };
      continue;
    }
    if (title === undefined) continue;
    const loc = LOCATION.exec(line);
    if (loc !== null) {
      cur.file = loc[1] ?? "";
      cur.line = Number(loc[2]);
    } else if (line.startsWith("E ") && cur.message.length < 4096) {
      cur.message += `${cur.message === "" ? "" : "\n"}${line.slice(1).trim()}`;
    }
  }
  close();
  return out;
}
