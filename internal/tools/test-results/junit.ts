/**
 * JUnit XML reports (pytest --junitxml, Maven Surefire/Failsafe, Gradle, jest-junit …,
 * one document or several read back together): a count per <testcase> (a <failure>
 * fails it, an <error> errs it, a <skipped> skips it), else the <testsuite> attributes
 * when a report lists no cases; a failure per failing or erroring case, its location from
 * the case's file/line attributes or, better, from its text (a Java frame of its class,
 * a "file.py:12: Error" line).
 *
 * Pure and bounded (xml-scan.ts never expands entities or reads a DTD; summary.ts caps
 * the rest). Must never: throw on any input.
 */

import { boundInput, collectSummary, type TestSummary } from "./summary.ts";
import { scanXml, type XmlElement } from "./xml-scan.ts";

export function looksLikeJunit(text: string): boolean {
  return /<testsuites?[\s>]/.test(text) && /<\/testsuites?>|<testcase[\s>/]/.test(text);
}

export function parseJunit(xml: string): TestSummary | undefined {
  const roots = scanXml(boundInput(xml));
  const cases: XmlElement[] = [];
  const suites: XmlElement[] = [];
  walk(roots, (e) => {
    if (e.name === "testcase") cases.push(e);
    else if (e.name === "testsuite") suites.push(e);
  });
  if (cases.length === 0 && suites.length === 0) return undefined;
  const out = collectSummary("junit");
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  if (cases.length === 0) {
    for (const s of suites) {
      const n = (k: string) => Number(s.attrs[k] ?? 0) || 0;
      counts.failed += n("failures");
      counts.errors += n("errors");
      counts.skipped += n("skipped") + n("disabled");
      counts.passed += Math.max(
        0,
        n("tests") - n("failures") - n("errors") - n("skipped") - n("disabled"),
      );
    }
    return out.done(counts);
  }
  for (const c of cases) {
    const failure = c.children.find((e) => e.name === "failure");
    const error = c.children.find((e) => e.name === "error");
    if (failure !== undefined || error !== undefined) {
      if (failure !== undefined) counts.failed++;
      else counts.errors++;
      out.fail(failureOf(c, (failure ?? error) as XmlElement));
    } else if (c.children.some((e) => e.name === "skipped")) counts.skipped++;
    else counts.passed++;
  }
  return out.done(counts);
}

function walk(els: XmlElement[], f: (e: XmlElement) => void): void {
  for (const e of els) {
    f(e);
    walk(e.children, f);
  }
}

function failureOf(
  c: XmlElement,
  f: XmlElement,
): { name: string; file: string; line: number; message: string } {
  const cls = c.attrs.classname ?? "";
  const name = c.attrs.name ?? "";
  const text = f.text;
  const loc = javaFrame(text, cls) ?? pythonLine(text);
  const message =
    (f.attrs.message ?? "").trim() || text.trim().split("\n")[0] || f.attrs.type || "";
  return {
    name: cls === "" ? name : `${cls}.${name}`,
    file: loc?.file ?? c.attrs.file ?? "",
    line: loc?.line ?? (Number(c.attrs.line ?? 0) || 0),
    message,
  };
}

/** The frame "at com.x.CalcTest.test(CalcTest.java:12)" of the case's own class. */
function javaFrame(text: string, cls: string): { file: string; line: number } | undefined {
  if (cls === "") return undefined;
  for (const m of text.matchAll(
    /^\s*at ([\w$.]+)\(([\w$-]+\.(?:java|kt|scala|groovy)):(\d+)\)/gm,
  )) {
    if ((m[1] ?? "").startsWith(`${cls}.`)) return { file: m[2] ?? "", line: Number(m[3]) };
  }
  return undefined;
}

/** pytest's "tests/test_x.py:12: AssertionError" (the last such line). */
function pythonLine(text: string): { file: string; line: number } | undefined {
  const m = [...text.matchAll(/^(\S+\.py):(\d+): \S/gm)].at(-1);
  return m === undefined ? undefined : { file: m[1] ?? "", line: Number(m[2]) };
}
