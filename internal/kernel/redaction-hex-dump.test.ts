/**
 * Hex dumps printed by the real tools (GNU xxd, od, hexdump and busybox's), with each value
 * at byte offsets 0..17 inside other bytes, redacted and then decoded again by a decoder
 * written here from the formats (not the one under test): no window of a value's bytes is
 * left in the hex, swapped words included, and none in the text columns. Then hostile
 * shapes: text columns that look like hex, CRLF, and inputs built to be slow.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { before, describe, it } from "node:test";
import { createRedactor, REDACTED } from "./redaction.ts";
import {
  BUSYBOX,
  containsBytes,
  decode,
  dumpAll,
  GNU,
  printable,
  windows,
} from "./redaction-dump-fixtures.ts";

const VALUES = [
  "ghp_0123SECRETvalue!é/",
  "p4$$.w*rd+(x)?[a-z]{2}|^\\d/",
  "abcd",
  "multi\nline\tsecret",
  // Long enough to span several lines; not periodic, or od and hexdump would fold its
  // repeated lines into "*" (see the test of that below).
  `long-${Array.from({ length: 90 }, (_, i) => String.fromCharCode(33 + ((i * i + 7 * i) % 94))).join("")}`,
];

/** Deterministic bytes around a value: random, and text whose column looks like hex. */
function surroundings(seed: number, n: number): Buffer[] {
  let x = seed * 2654435761;
  const rand = () => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return x;
  };
  const random = Buffer.alloc(n);
  for (let i = 0; i < n; i++) random[i] = rand() & 0xff;
  const hexish = Buffer.from("ab cd ef 01 23 45 67 89 dead beef cafe f00d ".repeat(4)).subarray(
    0,
    n,
  );
  return [random, hexish];
}

interface Case {
  value: string;
  offset: number;
  input: Buffer;
}

const cases: Case[] = [];
for (const value of VALUES) {
  for (let offset = 0; offset <= 17; offset++) {
    for (const [i, around] of surroundings(offset + 1, 64).entries()) {
      const bytes = Buffer.from(value);
      const input = Buffer.concat([around.subarray(0, offset), bytes, around.subarray(offset, 40)]);
      if (i === 0 || offset % 3 === 0) cases.push({ value, offset, input });
    }
  }
}

let dumps = new Map<string, string[]>();
before(() => {
  dumps = dumpAll(
    cases.map((c) => c.input),
    [...GNU, ...BUSYBOX],
  );
});

describe("hex dumps from real tools", () => {
  for (const f of [...GNU, ...BUSYBOX]) {
    it(`${f.name}: no bytes of a value left, at offsets 0..17`, () => {
      const parts = dumps.get(f.name) as string[];
      cases.forEach((c, i) => {
        const r = createRedactor({ secrets: () => [c.value] });
        const dump = parts[i] as string;
        const value = Buffer.from(c.value);
        const before = decode(dump, f);
        assert.ok(containsBytes(before.bytes, value), `the test decoder reads ${f.name}: ${dump}`);
        const out = r.text(dump);
        const label = `${f.name} offset ${c.offset} ${JSON.stringify(c.value)}:\n${dump}\n->\n${out}`;
        assert.ok(out.includes(REDACTED), label);
        const after = decode(out, f);
        const n = Math.min(6, value.length);
        for (const w of windows(value, n)) {
          assert.ok(!containsBytes(after.bytes, w), `hex of ${printable(w)} left in ${label}`);
          if (!/^\.+$/.test(printable(w))) {
            assert.ok(!after.column.includes(printable(w)), `column ${printable(w)} in ${label}`);
          }
        }
        assert.ok(!out.includes(c.value), label);
        const kept = out.split("\n").filter((l) => l !== "" && !l.includes(REDACTED));
        if (before.bytes.length - value.length >= 48) {
          assert.ok(kept.length > 0, `lines away from the value are kept: ${label}`);
        }
      });
    });
  }
});

describe("hex dumps: hostile and tricky shapes", () => {
  const value = "ghp_0123SECRETvalue";
  const r = createRedactor({ secrets: () => [value] });

  it("reads a text column that itself looks like hex as a column, not as bytes", () => {
    const input = Buffer.concat([Buffer.from("ab cd ef 01 23 4"), Buffer.from(value)]);
    const dump = execFileSync("/usr/bin/xxd", { input }).toString();
    assert.match(dump.split("\n")[0] as string, / {2}ab cd ef 01 23 4$/);
    assert.ok(!r.text(dump).includes("3031"), r.text(dump));
  });

  it("reads CRLF line ends (a dump through a terminal)", () => {
    const input = Buffer.concat([Buffer.from("0123456789"), Buffer.from(value), Buffer.from("!")]);
    const dump = execFileSync("/usr/bin/hexdump", ["-C"], { input }).toString();
    // Both lines hold part of the value: one redaction covers them, the end offset stays.
    assert.equal(r.text(dump.replaceAll("\n", "\r\n")), `${REDACTED}\r\n0000001e\r\n`);
  });

  it("misses a dump whose lines are interleaved with other text (documented)", () => {
    const input = Buffer.concat([Buffer.from("0123456789"), Buffer.from(value)]);
    const dump = execFileSync("/usr/bin/xxd", { input }).toString();
    const lines = dump.split("\n");
    const interleaved = `${lines[0]}\nprogress: 50%\n${lines.slice(1).join("\n")}`;
    assert.ok(!r.text(interleaved).includes(REDACTED));
  });

  it("misses a value whose repeated lines od folds into '*' (documented; od -v prints them)", () => {
    const periodic = "0123456789abcdef".repeat(4);
    const rp = createRedactor({ secrets: () => [periodic] });
    const folded = execFileSync("/usr/bin/od", ["-An", "-tx1"], { input: periodic }).toString();
    assert.match(folded, /^\*$/m);
    assert.ok(!rp.text(folded).includes(REDACTED));
    const all = execFileSync("/usr/bin/od", ["-An", "-tx1", "-v"], { input: periodic }).toString();
    assert.equal(rp.text(all), `${REDACTED}\n`);
  });

  it("leaves ordinary hex alone (offsets, digests, other bytes)", () => {
    const other = execFileSync("/usr/bin/xxd", {
      input: Buffer.from("nothing secret here at all"),
    });
    assert.equal(r.text(other.toString()), other.toString());
    const digest = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";
    assert.equal(r.text(digest), digest);
  });
});
