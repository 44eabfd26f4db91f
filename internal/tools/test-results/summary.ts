/**
 * The shape every test-output parser returns (one per format in this folder), and the
 * collector that keeps it bounded: at most MAX_FAILURES failures (the rest counted), each
 * field cut to its cap, every text cleaned of terminal escapes and control characters.
 *
 * Must never: keep unbounded text from a test's output, or return counts that are not
 * finite non-negative integers (a hostile output may claim anything).
 */
import { cleanText } from "./clean-text.ts";

/** One failing (or erroring) test. */
export interface TestFailure {
  /** The test's name as its runner names it (e.g. "tests::adds", "TestTable/two"). */
  name: string;
  /** The file the failure points at, as printed (relative when the runner prints so); "" if unknown. */
  file: string;
  /** 1-based line in `file`; 0 if unknown. */
  line: number;
  /** The failure's message (assertion text, exception), cut to MAX_MESSAGE characters. */
  message: string;
}

/** What a test run reported, in one shape for every format. */
export interface TestSummary {
  /** The format parsed: "junit", "go-json", "go-text", "tap", "libtest", "pytest", "unittest", "node-spec", "jest", "vitest", "surefire". */
  format: string;
  passed: number;
  failed: number;
  skipped: number;
  /** Errors outside assertions (pytest/unittest errors, build failures, JUnit <error>). */
  errors: number;
  /** The first MAX_FAILURES failures and errors. */
  failures: TestFailure[];
  /** How many more failures there were than `failures` lists. */
  moreFailures: number;
}

export const MAX_FAILURES = 50;
export const MAX_NAME = 300;
export const MAX_FILE = 300;
export const MAX_MESSAGE = 600;
/** Most characters of output a parser reads (tool output is already capped; this is a second bound). */
export const MAX_PARSE_INPUT = 4 * 1024 * 1024;

/** Builds a TestSummary with every bound applied. */
export interface SummaryCollector {
  fail(f: Partial<TestFailure> & { name: string }): void;
  done(counts: { passed: number; failed: number; skipped: number; errors: number }): TestSummary;
}

export function collectSummary(format: string): SummaryCollector {
  const failures: TestFailure[] = [];
  let more = 0;
  return {
    fail(f) {
      if (failures.length >= MAX_FAILURES) {
        more++;
        return;
      }
      failures.push({
        name: cleanText(f.name, MAX_NAME, true),
        file: cleanText(f.file ?? "", MAX_FILE, true),
        line: count(f.line ?? 0),
        message: cleanText(f.message ?? "", MAX_MESSAGE, false),
      });
    },
    done(c) {
      return {
        format,
        passed: count(c.passed),
        failed: count(c.failed),
        skipped: count(c.skipped),
        errors: count(c.errors),
        failures,
        // The rest: those past the cap, or past the input's bound (the counts say how many).
        moreFailures: Math.max(more, count(c.failed) + count(c.errors) - failures.length),
      };
    },
  };
}

/** A finite non-negative integer (0 otherwise), at most 2^32-1 (the proto's uint32). */
export function count(n: number): number {
  if (!Number.isFinite(n) || n < 0) return 0;
  return Math.min(Math.floor(n), 0xffff_ffff);
}

/** The last MAX_PARSE_INPUT characters of `s`: summaries come at the end of an output. */
export function boundInput(s: string): string {
  return s.length > MAX_PARSE_INPUT ? s.slice(s.length - MAX_PARSE_INPUT) : s;
}
