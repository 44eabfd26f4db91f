/** What the console shows an approver of a command: exactly what runs, nothing hidden. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { shellQuote, shownCommand, visible } from "../console/src/shown-text.ts";

it("quotes arguments so that different argv never look the same", () => {
  assert.notEqual(shownCommand(["sh", "-c", "a b"]), shownCommand(["sh", "-c", "a", "b"]));
  assert.equal(shownCommand(["sh", "-c", "a b"]), "sh -c 'a b'");
  assert.equal(shellQuote("it's"), `'it'\\''s'`);
  assert.equal(shellQuote("--flag=x,y"), "--flag=x,y");
  assert.equal(shellQuote(""), "''");
});

it("shows characters that hide or reorder text as escapes", () => {
  assert.equal(visible("rm -rf /\u202e/gnp.txt"), "rm -rf /\\u{202e}/gnp.txt");
  assert.equal(visible("a\u200bb\nc\u0000"), "a\\u{200b}b\\u{a}c\\u{0}");
  assert.equal(visible("plain text, ünïcödé"), "plain text, ünïcödé");
});
