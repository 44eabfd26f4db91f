/**
 * A test summary in words, the same for agentctl, the console and the model's context:
 * "2 failed, 14 passed, 1 skipped" and one line per failure ("name (file:line): message").
 * Works on the proto TestSummary and on summary.ts's TestSummary alike (same field names).
 *
 * Pure, no Node or DOM APIs (the console bundles it). Must never: return text with
 * control characters (the fields are cleaned again here: an event may come from anywhere).
 */

export interface SummaryLike {
  passed: number;
  failed: number;
  skipped: number;
  errors: number;
  format?: string;
  failures: readonly { name: string; file: string; line: number; message: string }[];
  moreFailures: number;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const UNSAFE = /\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/** `s` on one line, without control characters, at most `max` characters. */
export function safeLine(s: string, max: number): string {
  const flat = s.replace(UNSAFE, "").replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, Math.max(0, max - 1))}…` : flat;
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** "2 failed, 1 error, 14 passed, 1 skipped"; "no tests ran" when every count is 0. */
export function testCountsText(s: SummaryLike): string {
  const parts: string[] = [];
  if (s.failed > 0) parts.push(`${s.failed} failed`);
  if (s.errors > 0) parts.push(plural(s.errors, "error", "errors"));
  if (s.passed > 0 || parts.length > 0) parts.push(`${s.passed} passed`);
  if (s.skipped > 0) parts.push(`${s.skipped} skipped`);
  return parts.length === 0 ? "no tests ran" : parts.join(", ");
}

/** "file:line", "file" or "" for a failure. */
export function failureLocation(f: { file: string; line: number }): string {
  const file = safeLine(f.file, 300);
  return file === "" ? "" : f.line > 0 ? `${file}:${f.line}` : file;
}

/** "name (file:line): first line of the message", at most `max` characters. */
export function failureLine(f: SummaryLike["failures"][number], max = 200): string {
  const loc = failureLocation(f);
  const first = (f.message.split("\n").find((l) => l.trim() !== "") ?? "").trim();
  return safeLine(
    `${f.name}${loc === "" ? "" : ` (${loc})`}${first === "" ? "" : `: ${first}`}`,
    max,
  );
}

/**
 * The summary for the model: the counts, then each failure with its whole (capped)
 * message, indented. The model reads this before the command's output.
 */
export function testSummaryText(s: SummaryLike): string {
  const lines = [
    `Test results${s.format ? ` (${safeLine(s.format, 20)})` : ""}: ${testCountsText(s)}`,
  ];
  for (const f of s.failures) {
    const loc = failureLocation(f);
    lines.push(`FAILED ${safeLine(f.name, 300)}${loc === "" ? "" : ` at ${loc}`}`);
    const msg = f.message.replace(UNSAFE, "").trim();
    for (const l of msg.split("\n").slice(0, 12)) lines.push(`    ${l.trimEnd()}`);
  }
  if (s.moreFailures > 0) lines.push(`… and ${s.moreFailures} more failures (see the output)`);
  return lines.join("\n");
}
