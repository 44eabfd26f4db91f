/**
 * Parses a kubectl-style JSONPath template: literal text with actions in braces, as
 * `kubectl -o jsonpath=…` takes them: `{.runId}`, `{.items[*].runId}`, `{"\n"}` (a quoted
 * string, Go escapes), `{range .items[*]}…{end}` (nested ranges too). A "}" outside an
 * action is text, as in kubectl; a literal "{" is written `{"{"}`.
 *
 * Why our own parser and evaluator (this folder, ~400 lines) rather than a library: no npm
 * package implements kubectl's template syntax (text with `{…}` actions, quoted strings,
 * range/end); jsonpath-plus and jsonpath (RFC 9535 and Goessner paths) would evaluate the
 * paths only, are lenient where we must name the character of a mistake (an unclosed "["
 * selects nothing instead of failing), and evaluate filters as JavaScript, which a
 * kubectl template does not need.
 *
 * Must never accept a template it cannot run: every mistake (an unclosed brace, a range
 * without end, a stray end, an unknown word, a bad path) is a JsonPathError naming the
 * character it is about.
 */
import { Cursor } from "./cursor.ts";
import { parsePath, startsPath } from "./parse-path.ts";
import { JsonPathError, type TemplateNode } from "./syntax.ts";

interface Frame {
  body: TemplateNode[];
  /** 0-based index of the "{" that opened the range (the root: -1). */
  open: number;
}

export function parseTemplate(src: string): TemplateNode[] {
  const stack: Frame[] = [{ body: [], open: -1 }];
  let i = 0;
  while (i < src.length) {
    const open = src.indexOf("{", i);
    const body = (stack.at(-1) as Frame).body;
    if (open < 0) {
      body.push({ t: "text", text: src.slice(i) });
      break;
    }
    if (open > i) body.push({ t: "text", text: src.slice(i, open) });
    const close = findClose(src, open);
    action(new Cursor(src, open + 1, close), open, stack);
    i = close + 1;
  }
  const top = stack.at(-1) as Frame;
  if (stack.length > 1) throw new JsonPathError('"{range …}" has no "{end}"', top.open + 1);
  return top.body;
}

/** The index of the "}" closing the action opened at `open` (quotes may hold braces). */
function findClose(src: string, open: number): number {
  const c = new Cursor(src, open + 1);
  while (!c.atEnd()) {
    const ch = c.peek();
    if (ch === "}") return c.i;
    if (ch === '"' || ch === "'") {
      c.readQuoted();
      continue;
    }
    if (ch === "{")
      c.fail(
        `unexpected "{" inside the action opened at character ${open + 1} (close it with "}" first)`,
      );
    c.i++;
  }
  throw new JsonPathError('unclosed "{": an action ends with "}"', open + 1);
}

/** One action `{…}`: range, end, a quoted string or a path. */
function action(c: Cursor, open: number, stack: Frame[]): void {
  c.skipSpaces();
  const body = (stack.at(-1) as Frame).body;
  if (c.atEnd()) c.fail('empty action "{}"', open);
  const word = /^[A-Za-z]+/.exec(c.src.slice(c.i, c.end))?.[0];
  if (word === "range") {
    c.i += word.length;
    c.skipSpaces();
    if (!startsPath(c))
      c.fail(`"{range}" needs a path (e.g. {range .items[*]}), found ${c.here()}`);
    const range: TemplateNode = { t: "range", path: parsePath(c), body: [] };
    finish(c);
    body.push(range);
    stack.push({ body: range.body, open });
    return;
  }
  if (word === "end") {
    c.i += word.length;
    finish(c);
    if (stack.length === 1) c.fail('"{end}" closes no "{range}"', open);
    stack.pop();
    return;
  }
  if (word !== undefined)
    c.fail(
      `unknown word ${JSON.stringify(word)}: a path starts with "." (e.g. {.${word}}), "$" or "@"`,
    );
  if (c.peek() === '"' || c.peek() === "'") {
    const text = c.readQuoted();
    finish(c);
    body.push({ t: "text", text });
    return;
  }
  if (!startsPath(c))
    c.fail(`expected a path (e.g. {.runId}), a quoted string, range or end, found ${c.here()}`);
  body.push({ t: "path", path: parsePath(c) });
  finish(c);
}

/** Nothing but spaces may follow what the action held. */
function finish(c: Cursor): void {
  c.skipSpaces();
  if (!c.atEnd())
    c.fail(`unexpected ${c.here()} (one path or string per action; the action ends with "}")`);
}
