/**
 * `go test -json` (test2json events, one JSON object a line): counts from the tests'
 * pass/fail/skip events (a test with subtests counts through its subtests), a failure per
 * failing test with the location and message its output printed (`file_test.go:12: msg`,
 * or the test's frame in a panic's trace), an error per package that failed to build or
 * failed with no failing test. go-json-text.ts turns the same stream into the text people
 * and the model read.
 *
 * Pure and bounded (summary.ts). Must never: throw on any input, or keep more than a
 * bounded output per test.
 */
import { stripEscapes } from "./clean-text.ts";
import { boundInput, collectSummary, type TestSummary } from "./summary.ts";

interface GoEvent {
  Action?: unknown;
  Package?: unknown;
  Test?: unknown;
  Output?: unknown;
  ImportPath?: unknown;
  FailedBuild?: unknown;
}

/** Most output lines kept per test (the location and message come first). */
const MAX_TEST_LINES = 200;
const LOG_LINE = /^\s+([\w./-]+\.go):(\d+): (.*)$/;
const TRACE_LINE = /^\t(\S+_test\.go):(\d+)/;

function events(text: string): GoEvent[] {
  const out: GoEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(v as GoEvent);
    } catch {
      // not an event: go's own stderr lines, a test's stray stdout
    }
  }
  return out;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

export function looksLikeGoJson(text: string): boolean {
  return /^\{"(?:Time|ImportPath)":.*"Action":"/m.test(text);
}

export function parseGoJson(output: string): TestSummary | undefined {
  const evs = events(boundInput(output));
  if (evs.length === 0) return undefined;
  const results = new Map<string, { pkg: string; test: string; action: string }>();
  const logs = new Map<string, string[]>();
  const build = new Map<string, string[]>();
  const pkgFailed = new Map<string, string>();
  for (const e of evs) {
    const action = str(e.Action);
    const pkg = str(e.Package);
    const test = str(e.Test);
    if (action === "build-output") {
      const ip = str(e.ImportPath);
      const l = build.get(ip) ?? [];
      if (l.length < MAX_TEST_LINES) l.push(str(e.Output));
      build.set(ip, l);
    } else if (action === "output" && test !== "") {
      const key = `${pkg}\u0000${test}`;
      const l = logs.get(key) ?? [];
      if (l.length < MAX_TEST_LINES) l.push(str(e.Output));
      logs.set(key, l);
    } else if (action === "pass" || action === "fail" || action === "skip") {
      if (test !== "") results.set(`${pkg}\u0000${test}`, { pkg, test, action });
      else if (action === "fail") pkgFailed.set(pkg, str(e.FailedBuild));
    }
  }
  // Every proper prefix ("TestA", "TestA/b" of "TestA/b/c") is a parent: one pass, no n².
  const parents = new Set<string>();
  for (const key of results.keys())
    for (let i = key.indexOf("/"); i >= 0; i = key.indexOf("/", i + 1))
      parents.add(key.slice(0, i));
  const isParent = (key: string) => parents.has(key);
  const counts = { passed: 0, failed: 0, skipped: 0, errors: 0 };
  const out = collectSummary("go-json");
  const failingPkgs = new Set<string>();
  for (const [key, r] of results) {
    if (isParent(key)) continue;
    if (r.action === "pass") counts.passed++;
    else if (r.action === "skip") counts.skipped++;
    else {
      counts.failed++;
      failingPkgs.add(r.pkg);
      out.fail({ name: r.test, ...failureDetail(logs.get(key) ?? [], r.pkg) });
    }
  }
  for (const [pkg, failedBuild] of pkgFailed) {
    if (failingPkgs.has(pkg)) continue;
    counts.errors++;
    const lines = (failedBuild === "" ? [] : (build.get(failedBuild) ?? [])).map(stripEscapes);
    const at = lines
      .map((l) => /^([\w./-]+\.go):(\d+)(?::\d+)?: (.*)$/.exec(l.trim()))
      .find(Boolean);
    out.fail({
      name: pkg,
      file: at?.[1] ?? "",
      line: Number(at?.[2] ?? 0),
      message:
        failedBuild === ""
          ? "the package failed with no failing test (TestMain, a panic outside a test, or a timeout)"
          : `build failed: ${at?.[3] ?? lines.join("").trim()}`,
    });
  }
  return out.done(counts);
}

/** Location and message of a failing test from its output lines. */
function failureDetail(
  lines: string[],
  pkg: string,
): { file: string; line: number; message: string } {
  const clean = lines.map((l) => stripEscapes(l).replace(/\n$/, ""));
  for (const l of clean) {
    const m = LOG_LINE.exec(l);
    if (m !== null) return { file: m[1] ?? "", line: Number(m[2]), message: m[3] ?? "" };
  }
  const panic = clean.find((l) => l.startsWith("panic: "));
  const frame = clean.map((l) => TRACE_LINE.exec(l)).find(Boolean);
  const message =
    panic ??
    (clean
      .filter((l) => !/^(?:=== (?:RUN|PAUSE|CONT)|--- (?:FAIL|PASS|SKIP))/.test(l))
      .join("\n")
      .trim() ||
      `failed in ${pkg}`);
  return { file: frame?.[1] ?? "", line: Number(frame?.[2] ?? 0), message };
}
