/**
 * Test fixtures for redaction: hex dumps printed by the real tools (GNU xxd, od, hexdump
 * and busybox's, as the sandbox images have them) for many inputs at once, and a decoder
 * of those formats written from the formats themselves, independent of the redactor's.
 *
 * For tests only; it must never be imported by production code.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REDACTED } from "./redaction-spans.ts";

/** How a format prints: offset column, text column, word size (bytes swapped). */
export interface Format {
  name: string;
  cmd: string;
  offset: boolean;
  column: "none" | "xxd" | "pipes" | "angles";
  word: number;
}

export const GNU: Format[] = [
  { name: "xxd", cmd: "/usr/bin/xxd", offset: true, column: "xxd", word: 1 },
  { name: "xxd -g1", cmd: "/usr/bin/xxd -g1", offset: true, column: "xxd", word: 1 },
  { name: "xxd -u", cmd: "/usr/bin/xxd -u", offset: true, column: "xxd", word: 1 },
  { name: "xxd -c 8", cmd: "/usr/bin/xxd -c 8", offset: true, column: "xxd", word: 1 },
  { name: "xxd -c 32", cmd: "/usr/bin/xxd -c 32", offset: true, column: "xxd", word: 1 },
  { name: "xxd -g4", cmd: "/usr/bin/xxd -g4", offset: true, column: "xxd", word: 1 },
  { name: "xxd -e", cmd: "/usr/bin/xxd -e", offset: true, column: "xxd", word: 4 },
  { name: "xxd -p", cmd: "/usr/bin/xxd -p", offset: false, column: "none", word: 1 },
  { name: "od -An -tx1", cmd: "/usr/bin/od -An -tx1", offset: false, column: "none", word: 1 },
  { name: "od -tx1", cmd: "/usr/bin/od -tx1", offset: true, column: "none", word: 1 },
  {
    name: "od -A x -t x1z",
    cmd: "/usr/bin/od -A x -t x1z",
    offset: true,
    column: "angles",
    word: 1,
  },
  { name: "od -x", cmd: "/usr/bin/od -x", offset: true, column: "none", word: 2 },
  { name: "od -t x2", cmd: "/usr/bin/od -t x2", offset: true, column: "none", word: 2 },
  { name: "od -t x4", cmd: "/usr/bin/od -t x4", offset: true, column: "none", word: 4 },
  { name: "od -t x8", cmd: "/usr/bin/od -t x8", offset: true, column: "none", word: 8 },
  { name: "od -A d -t x1", cmd: "/usr/bin/od -A d -t x1", offset: true, column: "none", word: 1 },
  { name: "hexdump", cmd: "/usr/bin/hexdump", offset: true, column: "none", word: 2 },
  { name: "hexdump -x", cmd: "/usr/bin/hexdump -x", offset: true, column: "none", word: 2 },
  { name: "hexdump -C", cmd: "/usr/bin/hexdump -C", offset: true, column: "pipes", word: 1 },
];
export const BUSYBOX: Format[] = [
  { name: "busybox xxd", cmd: "/usr/bin/busybox xxd", offset: true, column: "xxd", word: 1 },
  {
    name: "busybox xxd -g1",
    cmd: "/usr/bin/busybox xxd -g1",
    offset: true,
    column: "xxd",
    word: 1,
  },
  {
    name: "busybox xxd -p",
    cmd: "/usr/bin/busybox xxd -p",
    offset: false,
    column: "none",
    word: 1,
  },
  {
    name: "busybox od -An -tx1",
    cmd: "/usr/bin/busybox od -An -tx1",
    offset: false,
    column: "none",
    word: 1,
  },
  {
    name: "busybox od -tx1",
    cmd: "/usr/bin/busybox od -tx1",
    offset: true,
    column: "none",
    word: 1,
  },
  { name: "busybox od -x", cmd: "/usr/bin/busybox od -x", offset: true, column: "none", word: 2 },
  {
    name: "busybox hexdump",
    cmd: "/usr/bin/busybox hexdump",
    offset: true,
    column: "none",
    word: 2,
  },
  {
    name: "busybox hexdump -x",
    cmd: "/usr/bin/busybox hexdump -x",
    offset: true,
    column: "none",
    word: 2,
  },
  {
    name: "busybox od -t x4",
    cmd: "/usr/bin/busybox od -t x4",
    offset: true,
    column: "none",
    word: 4,
  },
  {
    name: "busybox hexdump -C",
    cmd: "/usr/bin/busybox hexdump -C",
    offset: true,
    column: "pipes",
    word: 1,
  },
];

const SEP = "=====";

/**
 * The dump of each input by each format (one shell per format, not one process per dump:
 * spawning costs ~9 ms), in input order.
 */
export function dumpAll(
  inputs: readonly Buffer[],
  formats: readonly Format[],
): Map<string, string[]> {
  const dir = mkdtempSync(join(tmpdir(), "agentd-dump-"));
  try {
    inputs.forEach((input, i) => {
      writeFileSync(join(dir, String(i).padStart(5, "0")), input);
    });
    const dumps = new Map<string, string[]>();
    for (const f of formats) {
      const out = execFileSync(
        "/bin/sh",
        ["-c", `for f in "$0"/*; do ${f.cmd} "$f"; echo; echo ${SEP}; done`, dir],
        { maxBuffer: 256 * 1024 * 1024 },
      ).toString("utf8");
      const parts = out.split(`\n${SEP}\n`).slice(0, inputs.length);
      assert.equal(parts.length, inputs.length, f.name);
      dumps.set(f.name, parts);
    }
    return dumps;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Bytes and text column of each line, read the way the format prints them. */
export function decode(text: string, f: Format): { bytes: number[]; column: string } {
  const bytes: number[] = [];
  let column = "";
  for (const raw of text.split("\n")) {
    if (raw.includes(REDACTED)) {
      bytes.push(-1); // a redacted line: nothing of it is left, and it breaks any run
      column += "\0";
      continue;
    }
    let line = raw.replace(/\r$/, "");
    if (f.column === "pipes" && /\|.*\|$/.test(line)) {
      column += line.slice(line.indexOf("|") + 1, -1);
      line = line.slice(0, line.indexOf("|"));
    } else if (f.column === "angles" && />.*<$/.test(line)) {
      column += line.slice(line.indexOf(">") + 1, -1);
      line = line.slice(0, line.indexOf(">"));
    } else if (f.column === "xxd" && line.includes(": ")) {
      const hexEnd = line.indexOf("  ", line.indexOf(": ") + 1);
      if (hexEnd !== -1) {
        column += line.slice(hexEnd).trimStart();
        line = line.slice(0, hexEnd);
      }
    }
    let words = line.trim().split(/\s+/).filter(Boolean);
    if (f.offset) words = words.slice(1);
    for (const w of words) {
      if (!/^[0-9a-fA-F]+$/.test(w) || w.length % 2 !== 0) continue;
      const group = Buffer.from(w, "hex");
      if (f.word > 1) group.reverse();
      bytes.push(...group);
    }
  }
  return { bytes, column };
}

/** Every window of `n` consecutive bytes of `value`. */
export function windows(value: Buffer, n: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i + n <= value.length; i++) out.push(value.subarray(i, i + n));
  return out;
}

export const printable = (b: Buffer) =>
  [...b].map((c) => (c >= 0x20 && c <= 0x7e ? String.fromCharCode(c) : ".")).join("");

export function containsBytes(hay: number[], needle: Buffer): boolean {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}
