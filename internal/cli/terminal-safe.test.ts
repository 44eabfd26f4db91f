/**
 * The terminal guarantee's parts, each on every character the guarantee names: escaping
 * (terminal-safe.ts), the output guard that escapes everything and then adds only
 * agentctl's own colors (terminal-out.ts), whole messages escaped before rendering (safe-message.ts), the JSON
 * and YAML texts (output/serialize.ts) and the one-line fields (style.ts oneLine).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { parse as parseYaml } from "yaml";
import { EventSchema, PreviewSchema } from "../gen/agentd/v1/events_pb.js";
import { RunSchema } from "../gen/agentd/v1/run_service_pb.js";
import { jsonLine, jsonText, safeJson, yamlText } from "./output/serialize.ts";
import { commandLineOf, formatPreview } from "./render.ts";
import { escapeMessage } from "./safe-message.ts";
import { makeStyle, oneLine } from "./style.ts";
import { guardText } from "./terminal-out.ts";
import { escapeControls, escapeText } from "./terminal-safe.ts";

/** Every code point the guarantee names, written out (not taken from the implementation). */
function named(): number[] {
  const cps: number[] = [];
  const range = (a: number, b: number) => {
    for (let c = a; c <= b; c++) cps.push(c);
  };
  range(0x00, 0x08);
  range(0x0b, 0x1f);
  range(0x7f, 0x9f);
  range(0x202a, 0x202e);
  range(0x2066, 0x2069);
  cps.push(0x200e, 0x200f, 0x061c);
  range(0x200b, 0x200d);
  range(0x2060, 0x2064);
  cps.push(0xfeff, 0x2028, 0x2029, 0x00ad, 0x180e, 0x034f, 0x3164, 0x00a0, 0x2800, 0xfe0f);
  range(0xe0020, 0xe007f); // tag characters (ASCII smuggling)
  cps.push(0xe0001, 0xe0100);
  return cps;
}

const RAW =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that none is left
  /[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u2028\u2029\u{e0000}-\u{e01ef}]/u;

describe("escapeControls", () => {
  it("escapes every named character visibly and leaves nothing of it", () => {
    for (const cp of named()) {
      const c = String.fromCodePoint(cp);
      const out = escapeControls(`a${c}b`);
      assert.doesNotMatch(out, RAW, `U+${cp.toString(16)}`);
      assert.notEqual(out, "ab", `U+${cp.toString(16)} is shown, not dropped`);
      assert.match(
        out,
        /^a\\(x[0-9a-f]{2}|u[0-9a-f]{4}|u\{[0-9a-f]{5}\})b$/,
        `U+${cp.toString(16)}`,
      );
    }
    assert.equal(escapeControls("\x1b]52;c;cm0=\x07"), "\\x1b]52;c;cm0=\\x07");
    assert.equal(escapeControls("\u202egnp.exe"), "\\u202egnp.exe");
    assert.equal(escapeControls("\u{e0041}"), "\\u{e0041}");
    assert.equal(escapeControls("\x9b2J"), "\\x9b2J");
  });

  it("leaves tab, newline and every printable character as it is", () => {
    const plain = "tab\there\nnext ünïcödé — “quotes” ┌│└ ⠋ 🙂 日本語 العربية";
    assert.equal(escapeControls(plain), plain);
  });

  it("escapeText makes CRLF a line end and a lone CR visible", () => {
    assert.equal(escapeText("a\r\nb\rc"), "a\nb\\x0dc");
  });
});

describe("guardText (every byte agentctl writes)", () => {
  const st = makeStyle(true);
  const SGR = {
    red: (x: string) => `\x1b[31m${x}\x1b[39m`,
  };

  it("with colors on makes exactly agentctl's own colors SGR sequences and escapes every other sequence", () => {
    const own = `${st.bold("b")}${st.dim("d")}${st.red("r")}${st.green("g")}${st.yellow("y")}${st.magenta("m")}${st.cyan("c")}`;
    assert.equal(
      guardText(own, true),
      "\x1b[1mb\x1b[22m\x1b[2md\x1b[22m\x1b[31mr\x1b[39m\x1b[32mg\x1b[39m\x1b[33my\x1b[39m\x1b[35mm\x1b[39m\x1b[36mc\x1b[39m",
    );
    for (const bad of [
      "\x1b[2J",
      "\x1b[H",
      "\x1b[8m",
      "\x1b[7m",
      "\x1b[31;8m",
      "\x1b[32m",
      "\x1b[1m",
      "\x1b]52;c;x\x07",
      "\x1bP1$r\x1b\\",
      "\x1b_a\x1b\\",
      "\x1b^p\x1b\\",
      "\x1bXs\x1b\\",
      "\x9b2J",
      "\x1b[?1049h",
      "\r\x1b[2K",
    ]) {
      const out = guardText(`${st.red("x")}${bad}`, true);
      assert.ok(out.startsWith(SGR.red("x")), JSON.stringify(bad));
      assert.doesNotMatch(out.slice(SGR.red("x").length), RAW, JSON.stringify(bad));
    }
  });

  it("with colors off drops agentctl's own colors and escapes every ESC", () => {
    assert.equal(guardText(st.red("x"), false), "x");
    assert.equal(guardText(SGR.red("x"), false), "\\x1b[31mx\\x1b[39m");
    assert.doesNotMatch(
      guardText(
        named()
          .map((c) => String.fromCodePoint(c))
          .join(""),
        false,
      ),
      RAW,
    );
  });
});

describe("escapeMessage", () => {
  it("escapes every string of a message, nested and map keys, and leaves the message itself alone", () => {
    const run = create(RunSchema, {
      runId: "r",
      prompt: "p\x1b[2J",
      labels: { "k\u202e": "v\u200b" },
      error: { code: "EIO", message: "m\x9b" },
    });
    const safe = escapeMessage(RunSchema, run);
    assert.equal(safe.prompt, "p\\x1b[2J");
    assert.deepEqual(safe.labels, { "k\\u202e": "v\\u200b" });
    assert.equal(safe.error?.message, "m\\x9b");
    assert.equal(run.prompt, "p\x1b[2J", "a copy");
    const ev = create(EventSchema, {
      runId: "r",
      seq: 3n,
      type: "tool.output",
      payload: { case: "toolOutput", value: { callId: "c", chunk: "a\r\nb\x1b]0;t\x07" } },
    });
    const e = escapeMessage(EventSchema, ev);
    assert.equal(e.seq, 3n);
    assert.equal(e.payload.case === "toolOutput" && e.payload.value.chunk, "a\nb\\x1b]0;t\\x07");

    // Lists of messages, and a timestamp no JSON mapping could print (reflection, no round trip).
    const result = create(EventSchema, {
      runId: "r",
      ts: { seconds: 999_999_999_999n, nanos: 0 },
      payload: {
        case: "toolResult",
        value: {
          callId: "c",
          tests: {
            failures: [{ name: "t\x1b[2J", file: "f\u202e", message: "m" }],
          },
        },
      },
    });
    const r = escapeMessage(EventSchema, result);
    assert.equal(r.ts?.seconds, 999_999_999_999n);
    const failure =
      r.payload.case === "toolResult" ? r.payload.value.tests?.failures[0] : undefined;
    assert.equal(failure?.name, "t\\x1b[2J");
    assert.equal(failure?.file, "f\\u202e");
  });
});

describe("JSON and YAML texts", () => {
  const doc = {
    s: `x${named()
      .map((c) => String.fromCodePoint(c))
      .join("")}y`,
    tab: "a\tb\nc",
  };

  it("json, NDJSON and any serializer's JSON (safeJson) hold no raw unsafe character and parse back to the value", () => {
    for (const text of [jsonText(doc), jsonLine(doc), safeJson(JSON.stringify(doc))]) {
      assert.doesNotMatch(text, RAW);
      assert.deepEqual(JSON.parse(text), doc);
    }
  });

  it("yaml holds no raw unsafe character and parses back to the value", () => {
    const text = yamlText(doc);
    assert.doesNotMatch(text, RAW);
    assert.deepEqual(parseYaml(text), doc);
  });
});

describe("one-line fields and previews", () => {
  it("oneLine escapes (visibly) instead of dropping", () => {
    assert.equal(oneLine("a\x1b]0;t\x07b\u202ec\nd", 100), "a\\x1b]0;t\\x07b\\u202ec ⏎ d");
  });

  it("a command's preview shows its exact line, separators and redirections kept, escaped", () => {
    const line = "echo a\x1b[2J; rm -rf x > y && z\u202e";
    const p = create(PreviewSchema, {
      summary: `run ${JSON.stringify(line)} in /workspace`,
      argv: ["echo", "a\x1b[2J", "rm", "-rf", "x", "y", "z\u202e"],
      cwd: "/workspace",
    });
    assert.equal(commandLineOf(p.summary), "echo a\\x1b[2J; rm -rf x > y && z\\u202e");
    assert.equal(commandLineOf("patch a.txt: 1 hunk(s)"), undefined);
    const lines = formatPreview(p, makeStyle(false));
    assert.ok(
      lines.includes("command: echo a\\x1b[2J; rm -rf x > y && z\\u202e"),
      lines.join("\n"),
    );
    for (const l of lines) assert.doesNotMatch(l, RAW);
  });

  it("a diff with a hostile file name is escaped line by line", () => {
    const p = create(PreviewSchema, {
      files: ["f\x1b]0;t\x07.txt"],
      diff: "--- a/f\x1b]0;t\x07.txt\n+++ b/f\x1b]0;t\x07.txt\n@@ -1 +1 @@\n-a\r\n+b\u202e\n",
    });
    const lines = formatPreview(p, makeStyle(false));
    assert.ok(lines.includes("+++ b/f\\x1b]0;t\\x07.txt"), lines.join("\n"));
    assert.ok(lines.includes("+b\\u202e"));
    assert.ok(lines.includes("-a"), "a CRLF line end is a line end");
    for (const l of lines) assert.doesNotMatch(l, RAW);
  });
});
