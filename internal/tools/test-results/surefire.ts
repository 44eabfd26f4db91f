/**
 * Maven Surefire/Failsafe console output (`mvn test`, `mvn verify`), for when the XML
 * reports could not be read back (test-reports.ts): counts summed over the aggregate
 * "Tests run: N, Failures: N, Errors: N, Skipped: N" line of each module (the per-class
 * lines carry "Time elapsed" and are not counted), failures from the "Failures:" and
 * "Errors:" lists of Surefire 3 ("  CalcTest.addsWrong:7 message") or the "Failed tests:"
 * and "Tests in error:" lists of Surefire 2 ("addsWrong(ex.CalcTest): message").
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const TOTAL =
  /^(?:\[\w+\] )?Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$/gm;
/** Surefire 3: "[ERROR]   CalcTest.addsWrong:7 two and two expected…" */
const ITEM3 = /^\[ERROR\] {3}([\w$.]+?)\.([\w$]+)(?::(\d+))?(?: (.*))?$/;
/** Surefire 2: "addsWrong(ex.CalcTest): two and two…" (first on the list's own line). */
const ITEM2 = /^(?:Failed tests: +| {2})([\w$]+)\(([\w$.]+)\)(?:: (.*))?$/;

export function looksLikeSurefire(text: string): boolean {
  return /^(?:\[\w+\] )?Tests run: \d+, Failures: \d+, Errors: \d+, Skipped: \d+/m.test(text);
}

export function parseSurefire(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  let seen = false;
  for (const m of text.matchAll(TOTAL)) {
    seen = true;
    const [run, failures, errors, skipped] = [m[1], m[2], m[3], m[4]].map(Number) as number[];
    counts.failed += failures ?? 0;
    counts.errors += errors ?? 0;
    counts.skipped += skipped ?? 0;
    counts.passed += Math.max(0, (run ?? 0) - (failures ?? 0) - (errors ?? 0) - (skipped ?? 0));
  }
  if (!seen) return undefined;
  const out = collectSummary("surefire");
  let inList = false;
  for (const line of text.split("\n")) {
    if (
      /^\[ERROR\] (?:Failures|Errors): ?$/.test(line) ||
      /^(?:Failed tests:|Tests in error:)/.test(line)
    )
      inList = true;
    else if (inList && !/^(?:\[ERROR\] {3}| {2}\S)/.test(line)) inList = false;
    if (!inList) continue;
    const m3 = ITEM3.exec(line);
    if (m3 !== null) {
      const cls = m3[1] ?? "";
      out.fail({
        name: `${cls}.${m3[2]}`,
        file: `${(cls.split(".").at(-1) ?? cls).split("$")[0]}.java`,
        line: Number(m3[3] ?? 0),
        message: m3[4] ?? "",
      });
      continue;
    }
    const m2 = ITEM2.exec(line);
    if (m2 !== null) out.fail({ name: `${m2[2]}.${m2[1]}`, message: m2[3] ?? "" });
  }
  return out.done(counts);
}
