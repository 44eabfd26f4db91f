/**
 * `go test`'s text output, for a Go test command agentd did not write (the policy's or
 * `.agent/config.yaml`'s; the detected one prints -json, see go-json.ts): leaf tests'
 * "--- PASS/FAIL/SKIP: name" lines (subtests indented; a test with subtests counts
 * through them), each failure's first `file_test.go:12: message` log line (before its
 * "--- FAIL" line with -v, after it without) or its panic and the test's frame in the
 * trace, and an error per package that did not build or failed with no failing test.
 * Without -v, go prints only failures: passing tests are not counted.
 *
 * Pure and bounded (summary.ts). Must never: throw on any input.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

const RESULT = /^\s*--- (PASS|FAIL|SKIP): (\S+) \(/;
const RUN = /^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)/;
const LOG = /^\s+([\w./-]+\.go):(\d+): (.*)$/;
const TRACE = /^\t(\S+_test\.go):(\d+)/;
const PKG = /^(ok|FAIL)\s+(\S+)\s+(?:\(cached\)|[\d.]+s|\[(.*)\])/;
const BUILD_HEAD = /^# (\S+)/;
const BUILD_ERR = /^([\w./-]+\.go):(\d+)(?::\d+)?: (.*)$/;

export function looksLikeGoText(text: string): boolean {
  return (
    /^[ \t]*--- (?:FAIL|PASS|SKIP): \S+ \(/m.test(text) ||
    /^(?:ok|FAIL)[ \t]+\S+[ \t]+(?:\(cached\)|[\d.]+s|\[)/m.test(text)
  );
}

interface Detail {
  file: string;
  line: number;
  message: string;
}

export function parseGoText(output: string): TestSummary | undefined {
  const text = boundInput(stripEscapes(output));
  if (!looksLikeGoText(text)) return undefined;
  const results = new Map<string, string>();
  const details = new Map<string, Detail>();
  const builds = new Map<string, Detail>();
  const pkgErrors: { pkg: string; detail: Detail }[] = [];
  let current = "";
  let building = "";
  let failedSincePkg = 0;
  for (const line of text.split("\n")) {
    const run = RUN.exec(line);
    const res = RESULT.exec(line);
    const pkg = PKG.exec(line);
    if (run !== null) current = run[1] ?? "";
    else if (res !== null) {
      current = res[2] ?? "";
      results.set(current, res[1] ?? "");
      if (res[1] === "FAIL") failedSincePkg++;
    } else if (pkg !== null) {
      const name = pkg[2] ?? "";
      if (pkg[1] === "FAIL" && (pkg[3] ?? "").startsWith("build failed")) {
        pkgErrors.push({
          pkg: name,
          detail: builds.get(name) ?? { file: "", line: 0, message: "build failed" },
        });
      } else if (pkg[1] === "FAIL" && failedSincePkg === 0) {
        pkgErrors.push({
          pkg: name,
          detail: {
            file: "",
            line: 0,
            message:
              "the package failed with no failing test (TestMain, a panic outside a test, or a timeout)",
          },
        });
      }
      failedSincePkg = 0;
      current = "";
    } else if (BUILD_HEAD.test(line)) {
      building = (BUILD_HEAD.exec(line)?.[1] ?? "").trim();
      current = "";
    } else if (building !== "" && BUILD_ERR.test(line)) {
      const m = BUILD_ERR.exec(line);
      if (!builds.has(building))
        builds.set(building, {
          file: m?.[1] ?? "",
          line: Number(m?.[2]),
          message: `build failed: ${m?.[3] ?? ""}`,
        });
    } else if (current !== "") {
      const d = details.get(current) ?? { file: "", line: 0, message: "" };
      const log = LOG.exec(line);
      const trace = TRACE.exec(line);
      if (log !== null && d.message === "")
        Object.assign(d, { file: log[1], line: Number(log[2]), message: log[3] });
      else if (line.startsWith("panic: ") && d.message === "") d.message = line;
      else if (trace !== null && d.file === "")
        Object.assign(d, { file: trace[1], line: Number(trace[2]) });
      details.set(current, d);
    }
  }
  const parents = new Set<string>();
  for (const name of results.keys())
    for (let i = name.indexOf("/"); i >= 0; i = name.indexOf("/", i + 1))
      parents.add(name.slice(0, i));
  const counts = { passed: 0, failed: 0, skipped: 0, errors: pkgErrors.length };
  const out = collectSummary("go-text");
  for (const [name, status] of results) {
    if (parents.has(name)) continue;
    if (status === "PASS") counts.passed++;
    else if (status === "SKIP") counts.skipped++;
    else {
      counts.failed++;
      out.fail({ name, ...(details.get(name) ?? {}) });
    }
  }
  for (const e of pkgErrors) out.fail({ name: e.pkg, ...e.detail });
  return out.done(counts);
}
