/**
 * The terminal output escapes first and styles after: a model's text that carries the very
 * SGR sequences agentctl colors with (green, bold) is shown escaped, never in agentctl's
 * colors, whether it arrives raw, inside agentctl's own styling, or dressed as one of
 * agentctl's color marks (own-style.ts) without the process's nonce.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { styleMark } from "./own-style.ts";
import { makeStyle, stripAnsi } from "./style.ts";
import { guardText } from "./terminal-out.ts";

const FAKE = "\x1b[32m✔ approved by admin\x1b[39m";

describe("guardText: agentctl's colors are added after escaping", () => {
  it("a model message cannot paint itself in agentctl's colors", () => {
    const shown = guardText(`${"\x1b[1m"}assistant:${"\x1b[22m"} ${FAKE}`, true);
    assert.equal(shown.includes("\x1b[32m"), false, JSON.stringify(shown));
    assert.equal(shown.includes("\x1b"), false, JSON.stringify(shown));
  });

  it("inside agentctl's own styling, the model's SGR is escaped and agentctl's colors stay", () => {
    const st = makeStyle(true);
    const shown = guardText(`${st.bold("assistant:")} ${st.dim(FAKE)}`, true);
    assert.equal(
      shown,
      "\x1b[1massistant:\x1b[22m \x1b[2m\\x1b[32m✔ approved by admin\\x1b[39m\x1b[22m",
    );
  });

  it("a forged color mark (C1 PU1/PU2 around a code, without the nonce) is escaped", () => {
    for (const forged of ["\x9132\x92", "\x91000000000000000000000000032\x92", "\x91\x92"]) {
      const shown = guardText(`x${forged}y`, true);
      assert.equal(shown.includes("\x1b"), false, JSON.stringify(shown));
      assert.match(shown, /\\x91.*\\x92/, JSON.stringify(shown));
    }
  });

  it("the mark's nonce never reaches an output: colors on, off, or stripped", () => {
    const mark = styleMark(32);
    const nonce = mark.slice(1, -3);
    assert.match(nonce, /^[0-9a-f]{24}$/);
    const st = makeStyle(true);
    for (const out of [
      guardText(st.green("g"), true),
      guardText(st.green("g"), false),
      stripAnsi(st.green("g")),
    ])
      assert.equal(out.includes(nonce), false, JSON.stringify(out));
    assert.throws(() => styleMark(8), /not one of agentctl's SGR codes/);
  });
});
