/**
 * The step's log: what the action says, what agentctl says on stderr, and GitHub's
 * workflow commands (`::notice::`, `::error::`), written to stdout where the runner reads
 * them line by line.
 *
 * Must never: let text from the run or the server start a line with `::` (the runner would
 * obey it: set an output, an environment variable, stop masking); every line it relays is
 * prefixed, and carriage returns (which the runner also splits on) are dropped.
 */

/** Text with no line the runner could read as a workflow command. */
export function relayLines(prefix: string, text: string): string {
  return (
    text
      .replace(/\r\n?/g, "\n")
      .split("\n")
      .filter((l) => l.trim() !== "")
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
      .map((l) => `${prefix}${l.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "\ufffd")}\n`)
      .join("")
  );
}

/** A workflow command's message, escaped as the runner expects (%, CR, LF). */
function escapeData(s: string): string {
  return s.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

/** A workflow command's property value (also `:` and `,`). */
function escapeProperty(s: string): string {
  return escapeData(s).replace(/:/g, "%3A").replace(/,/g, "%2C");
}

export interface Log {
  info(text: string): void;
  /** An annotation shown on the run's page: notice, warning or error. */
  annotate(level: "notice" | "warning" | "error", title: string, message: string): void;
}

/** A Log writing to `write` (process.stdout's). */
export function createLog(write: (s: string) => void): Log {
  return {
    info: (text) => write(relayLines("agentd-action: ", text)),
    annotate: (level, title, message) =>
      write(`::${level} title=${escapeProperty(title)}::${escapeData(message)}\n`),
  };
}
