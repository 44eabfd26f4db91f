/**
 * A reading position in a template, for the parsers of this folder: peeks, skips spaces,
 * reads quoted strings (Go's escapes, as kubectl's templates take them), and fails with
 * the 1-based character position. It never reads past `end` (the action's closing brace).
 */
import { JsonPathError } from "./syntax.ts";

const ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "\\": "\\",
  '"': '"',
  "'": "'",
  "/": "/",
  ".": ".",
};

export class Cursor {
  readonly src: string;
  /** Index of the next character (0-based) in `src`. */
  i: number;
  /** Where reading stops (exclusive). */
  readonly end: number;

  constructor(src: string, start = 0, end = src.length) {
    this.src = src;
    this.i = start;
    this.end = end;
  }

  peek(k = 0): string | undefined {
    return this.i + k < this.end ? this.src[this.i + k] : undefined;
  }

  atEnd(): boolean {
    return this.i >= this.end;
  }

  skipSpaces(): void {
    while (this.peek() === " " || this.peek() === "\t") this.i++;
  }

  /** Consumes `s` when it comes next. */
  eat(s: string): boolean {
    if (this.src.startsWith(s, this.i) && this.i + s.length <= this.end) {
      this.i += s.length;
      return true;
    }
    return false;
  }

  /** Consumes `s` or fails saying it was expected `where`. */
  expect(s: string, where: string): void {
    if (!this.eat(s)) this.fail(`expected ${JSON.stringify(s)} ${where}, found ${this.here()}`);
  }

  /** The next character for a message: `"x"`, or "the end". */
  here(): string {
    const c = this.peek();
    return c === undefined ? "the end" : JSON.stringify(c);
  }

  fail(problem: string, at = this.i): never {
    throw new JsonPathError(problem, at + 1);
  }

  /** Reads a "…" or '…' string at the cursor (its escapes: \n \t \r \\ \" \' \xNN \uNNNN). */
  readQuoted(): string {
    const quote = this.peek();
    const start = this.i;
    this.i++;
    let out = "";
    for (;;) {
      const c = this.peek();
      if (c === undefined) this.fail(`unterminated string (opened with ${quote})`, start);
      this.i++;
      if (c === quote) return out;
      if (c !== "\\") {
        out += c;
        continue;
      }
      out += this.readEscape();
    }
  }

  private readEscape(): string {
    const at = this.i - 1;
    const e = this.peek();
    this.i++;
    if (e !== undefined && Object.hasOwn(ESCAPES, e)) return ESCAPES[e] as string;
    const digits = e === "x" ? 2 : e === "u" ? 4 : 0;
    const hex = this.src.slice(this.i, this.i + digits);
    if (digits > 0 && hex.length === digits && /^[0-9a-fA-F]+$/.test(hex)) {
      this.i += digits;
      return String.fromCodePoint(Number.parseInt(hex, 16));
    }
    this.fail(`unknown escape \\${e ?? ""} (known: \\n \\t \\r \\\\ \\" \\' \\xNN \\uNNNN)`, at);
  }
}
