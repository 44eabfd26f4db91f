/**
 * Which format a test command printed, and its parsed summary: the command's own words
 * pick the likely parser first (pytest, unittest, go test -json, cargo, node --test, mvn), then
 * every format is sniffed in turn; JUnit reports read back from files come first when
 * there are any. Paths under /workspace/ are shown relative to it.
 *
 * Pure. Must never: throw, or claim a summary when no parser recognised the output (an
 * unknown format is `undefined`, and the exit code speaks alone).
 */
import { stripEscapes } from "./clean-text.ts";
import { looksLikeGoJson, parseGoJson } from "./go-json.ts";
import { looksLikeGoText, parseGoText } from "./go-text.ts";
import { looksLikeJest, parseJest } from "./jest.ts";
import { looksLikeJunit, parseJunit } from "./junit.ts";
import { looksLikeLibtest, parseLibtest } from "./libtest.ts";
import { looksLikeNodeSpec, parseNodeSpec } from "./node-spec.ts";
import { looksLikePytest, parsePytest } from "./pytest.ts";
import type { TestSummary } from "./summary.ts";
import { looksLikeSurefire, parseSurefire } from "./surefire.ts";
import { looksLikeTap, parseTap } from "./tap.ts";
import { looksLikeUnittest, parseUnittest } from "./unittest.ts";
import { looksLikeVitest, parseVitest } from "./vitest.ts";

export interface TestOutput {
  command: string;
  stdout: string;
  stderr: string;
  /** JUnit XML reports the command wrote, read back from the sandbox. */
  reports?: string;
  /** The format the command prints, when agentd wrote it so (CommandSpec.output). */
  format?: "go-json";
}

interface Format {
  name: string;
  /** Words of a command that prints this format. */
  hint: RegExp;
  /** Which stream(s) it is printed on. */
  text: (o: TestOutput) => string;
  looks: (text: string) => boolean;
  parse: (text: string) => TestSummary | undefined;
}

const both = (o: TestOutput) => `${o.stdout}\n${o.stderr}`;

const FORMATS: readonly Format[] = [
  {
    name: "go-json",
    hint: /\bgo test\b.*-json\b/,
    text: (o) => o.stdout,
    looks: looksLikeGoJson,
    parse: parseGoJson,
  },
  {
    name: "tap",
    hint: /--test-reporter[= ]tap\b|\btap\b/,
    text: both,
    looks: looksLikeTap,
    parse: parseTap,
  },
  {
    name: "node-spec",
    hint: /\bnode\b.*--test\b|\bnpm\b|\bpnpm\b|\byarn\b/,
    text: both,
    looks: looksLikeNodeSpec,
    parse: parseNodeSpec,
  },
  { name: "libtest", hint: /\bcargo\b/, text: both, looks: looksLikeLibtest, parse: parseLibtest },
  {
    name: "jest",
    hint: /\bjest\b|\bnpm\b|\bpnpm\b|\byarn\b/,
    text: both,
    looks: looksLikeJest,
    parse: parseJest,
  },
  {
    name: "vitest",
    hint: /\bvitest\b|\bnpm\b|\bpnpm\b|\byarn\b/,
    text: both,
    looks: looksLikeVitest,
    parse: parseVitest,
  },
  {
    name: "go-text",
    hint: /\bgo test\b/,
    text: both,
    looks: looksLikeGoText,
    parse: parseGoText,
  },
  {
    name: "surefire",
    hint: /\bmvnw?\b/,
    text: both,
    looks: looksLikeSurefire,
    parse: parseSurefire,
  },
  {
    name: "pytest",
    hint: /\bpytest\b|\btox\b/,
    text: both,
    looks: looksLikePytest,
    parse: parsePytest,
  },
  {
    name: "unittest",
    hint: /\bunittest\b/,
    text: (o) => `${o.stderr}\n${o.stdout}`,
    looks: looksLikeUnittest,
    parse: parseUnittest,
  },
];

export function parseTestOutput(o: TestOutput): TestSummary | undefined {
  const fromReports =
    o.reports !== undefined && looksLikeJunit(o.reports) ? parseJunit(o.reports) : undefined;
  if (fromReports !== undefined) return relativize(fromReports);
  if (o.format === "go-json") {
    const s = parseGoJson(o.stdout);
    if (s !== undefined) return relativize(s);
  }
  const hinted = FORMATS.filter((f) => f.hint.test(o.command));
  for (const f of [...hinted, ...FORMATS.filter((x) => !hinted.includes(x))]) {
    const text = stripEscapes(f.text(o));
    if (!f.looks(text)) continue;
    const s = f.parse(text);
    if (s !== undefined) return relativize(s);
  }
  return undefined;
}

/** "/workspace/tests/x.py" → "tests/x.py": the model and people know the workspace root. */
function relativize(s: TestSummary): TestSummary {
  for (const f of s.failures) if (f.file.startsWith("/workspace/")) f.file = f.file.slice(11);
  return s;
}
