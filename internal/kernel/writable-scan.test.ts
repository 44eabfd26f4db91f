/**
 * The containment scan's digests (pure): what a later program could read back of an entry
 * is in its digest — a file's content, mode, owner, size, mtime and ctime, a link's
 * target — while a directory's times (reset by the scan after a secret call) are not.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { digestOf, parseScan } from "./writable-scan.ts";

const T = "2026-11-28 12:00:00.000000001 +0000";
const T2 = "2026-11-28 12:00:00.000000002 +0000";
const H = "a".repeat(64);
const file = (mode: string, size: string, m: string, c: string) =>
  `81${mode} 1000 1000 ${size} ${m} ${c}`;

describe("digestOf", () => {
  it("a file's digest moves with its content, mode, size, mtime and ctime", () => {
    const base = digestOf(file("a4", "3", T, T), { content: H });
    for (const other of [
      digestOf(file("a4", "3", T, T), { content: "b".repeat(64) }),
      digestOf(file("ed", "3", T, T), { content: H }),
      digestOf(file("a4", "4", T, T), { content: H }),
      digestOf(file("a4", "3", T2, T), { content: H }),
      digestOf(file("a4", "3", T, T2), { content: H }),
      digestOf(file("a4", "3", T, T), {}),
    ])
      assert.notEqual(other, base);
    assert.equal(digestOf(file("a4", "3", T, T), { content: H }), base);
  });
  it("a link's digest moves with its target; a missed target never equals a read one", () => {
    const meta = `a1ff 1000 1000 1 ${T} ${T}`;
    assert.notEqual(digestOf(meta, { target: "x" }), digestOf(meta, { target: "y" }));
    assert.notEqual(digestOf(meta, { target: "?" }), digestOf(meta, {}));
  });
  it("a directory's digest holds its mode and owner, not its times or size", () => {
    assert.equal(
      digestOf(`41ed 1000 1000 40 ${T} ${T}`, {}),
      digestOf(`41ed 1000 1000 80 ${T2} ${T2}`, {}),
    );
    assert.notEqual(
      digestOf(`41ed 1000 1000 40 ${T} ${T}`, {}),
      digestOf(`41c0 1000 1000 40 ${T} ${T}`, {}),
    );
  });
  it("never holds the raw metadata or target (a secret's bytes could be there)", () => {
    const d = digestOf(`a1ff 1000 1000 1 ${T} ${T}`, { target: "tok3n-secret" });
    assert.match(d, /^link:[0-9a-f]{64}$/);
    assert.match(digestOf(`21b6 0 0 0 ${T} ${T}`, {}), /^other:[0-9a-f]{64}$/);
  });
});

describe("parseScan", () => {
  it("a file seen by one walk and not the other: left out, or its content unknown", () => {
    const s = parseScan(`${H}  /tmp/gone\nM 81a4 1000 1000 3 ${T} ${T}  /tmp/new\nEND\n`);
    assert.deepEqual([...(s?.keys() ?? [])], ["/tmp/new"]);
    assert.equal(s?.get("/tmp/new"), digestOf(`81a4 1000 1000 3 ${T} ${T}`, {}));
  });
  it("a link's target line is taken whole, whatever it holds", () => {
    const s = parseScan(`M a1ff 1000 1000 3 ${T} ${T}  /w/l\nL /w/l\nEND\nEND\n`);
    assert.equal(s?.get("/w/l"), digestOf(`a1ff 1000 1000 3 ${T} ${T}`, { target: "END" }));
  });
});
