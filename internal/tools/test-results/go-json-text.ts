/**
 * A `go test -json` stream (test2json events, one JSON object a line) shown as the text
 * plain `go test` prints: the output of failing tests (without the "=== RUN" lines), the
 * packages' own lines ("ok  pkg 0.01s", "FAIL pkg", panics) and build errors; the output
 * of passing and skipped tests is dropped, as go itself does without -v. A test that never
 * ended (a timeout, a crash) shows all it printed. Lines that are not events pass as they
 * are. Used whole (the result's stdout) and streamed (the live tool.output).
 *
 * Must never: hold more than MAX_TEST_LINES lines of one test, or lose a line of a test
 * that failed or did not end.
 */

/** Most lines kept of one test while it runs (its failure's location and message come first). */
const MAX_TEST_LINES = 500;
const RUN_LINE = /^=== (?:RUN|PAUSE|CONT|NAME)\s/;

interface Event {
  Action?: unknown;
  Package?: unknown;
  Test?: unknown;
  Output?: unknown;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

/** Feeds complete lines; returns the text each one releases. */
export interface GoJsonTextRenderer {
  line(line: string): string;
  /** What is still held: tests that never ended. */
  end(): string;
}

export function createGoJsonTextRenderer(): GoJsonTextRenderer {
  const held = new Map<string, string[]>();
  return {
    line(line) {
      if (line === "") return "";
      let e: Event;
      try {
        const v: unknown = JSON.parse(line);
        if (v === null || typeof v !== "object" || Array.isArray(v)) return `${line}\n`;
        e = v as Event;
      } catch {
        return `${line}\n`;
      }
      const action = str(e.Action);
      const test = str(e.Test);
      if (test === "") {
        const out = action === "output" || action === "build-output" ? str(e.Output) : "";
        return out === "PASS\n" ? "" : out; // go without -v prints "ok  pkg" alone
      }
      const key = `${str(e.Package)}\u0000${test}`;
      if (action === "output") {
        const out = str(e.Output);
        if (RUN_LINE.test(out)) return "";
        const lines = held.get(key) ?? [];
        if (lines.length < MAX_TEST_LINES) lines.push(out);
        else if (lines.length === MAX_TEST_LINES)
          lines.push("    [agentd: more output of this test left out]\n");
        held.set(key, lines);
        return "";
      }
      if (action === "pass" || action === "skip" || action === "fail") {
        const lines = held.get(key) ?? [];
        held.delete(key);
        return action === "fail" ? lines.join("") : "";
      }
      return "";
    },
    end() {
      const rest = [...held.values()].map((l) => l.join("")).join("");
      held.clear();
      return rest;
    },
  };
}

/** The text of a whole `go test -json` output. */
export function goJsonText(output: string): string {
  const r = createGoJsonTextRenderer();
  let out = "";
  for (const line of output.split("\n")) out += r.line(line);
  return out + r.end();
}

/** goJsonText in chunks as they come: a line is rendered once it is complete. */
export function createGoJsonTextStream(): { push(chunk: string): string; end(): string } {
  const r = createGoJsonTextRenderer();
  let partial = "";
  return {
    push(chunk) {
      const text = partial + chunk;
      const cut = text.lastIndexOf("\n");
      if (cut < 0) {
        // A line longer than any event is not an event: pass it on rather than hold it.
        if (text.length > 1024 * 1024) {
          partial = "";
          return text;
        }
        partial = text;
        return "";
      }
      partial = text.slice(cut + 1);
      let out = "";
      for (const line of text.slice(0, cut).split("\n")) out += r.line(line);
      return out;
    },
    end() {
      const rest = partial === "" ? "" : r.line(partial);
      partial = "";
      return rest + r.end();
    },
  };
}
