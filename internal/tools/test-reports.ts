/**
 * JUnit XML reports that Maven (Surefire, Failsafe) and Gradle write, read back from the
 * sandbox after test.run's command: their console output names failing tests poorly, the
 * reports name every test with its stack. Only reports written during this call are read:
 * a marker file is made before the command runs and `find -newer` selects what is newer.
 *
 * These are agentd's own reads, not the model's calls: one exec that makes the marker
 * before, one that lists and prints the reports after, both bounded (time, bytes, file
 * count), never following symlinks (find -type f), skipping node_modules and .git.
 *
 * Must never: change anything in the workspace, or fail the call (no reports, a find
 * that cannot run, a marker that is gone: the console output is parsed instead).
 */
import { randomUUID } from "node:crypto";
import { WORKSPACE } from "../sandbox/port.ts";
import type { ToolContext } from "./tool.ts";

/** Commands whose test reports are read back: mvn, ./mvnw, gradle, ./gradlew. */
const BUILD_TOOL = /(?:^|[\s/;&|(])(?:mvn|mvnw|gradle|gradlew)(?=\s|$)/;
/** Most bytes of reports read (the XML parser reads at most this much too). */
export const MAX_REPORT_BYTES = 4 * 1024 * 1024;
const MAX_REPORT_FILES = 2000;
/** Reading is a find and a cat: never long, but a huge tree must not stall the call. */
const READ_TIMEOUT_MS = 30_000;

export function readsReports(command: string): boolean {
  return BUILD_TOOL.test(command);
}

const MARK = 'mkdir -p /tmp/.agentd && : > "$1"';
const READ = [
  'test -f "$1" || exit 3;',
  "find . \\( -name node_modules -o -name .git \\) -prune -o -type f \\(",
  "-path '*/target/surefire-reports/TEST-*.xml' -o -path '*/target/failsafe-reports/TEST-*.xml'",
  "-o -path '*/build/test-results/*/TEST-*.xml' \\) -newer \"$1\" -print 2>/dev/null",
  `| head -n ${MAX_REPORT_FILES} | while IFS= read -r f; do cat -- "$f"; done | head -c ${MAX_REPORT_BYTES};`,
  'rm -f -- "$1"',
].join(" ");

export interface ReportReader {
  /** The reports written since the marker, or undefined when there are none to read. */
  read(): Promise<string | undefined>;
}

/** Makes the marker now; `read` reads what was written after it. */
export async function startReports(ctx: ToolContext): Promise<ReportReader> {
  const marker = `/tmp/.agentd/test-start-${randomUUID()}`;
  const exec = (script: string) =>
    ctx.sandbox.exec({
      argv: ["sh", "-c", script, "sh", marker],
      cwd: WORKSPACE,
      cwdWithin: WORKSPACE,
      timeoutMs: READ_TIMEOUT_MS,
      maxOutputBytes: MAX_REPORT_BYTES + 64 * 1024,
    });
  const made = await exec(MARK).then(
    (r) => r.exitCode === 0,
    () => false,
  );
  return {
    async read() {
      if (!made) return undefined;
      try {
        const r = await exec(READ);
        return r.exitCode === 0 && r.stdout.trim() !== "" ? r.stdout : undefined;
      } catch {
        return undefined; // the console output is parsed instead
      }
    },
  };
}
