/**
 * Held names alone (attack-secret-path-name.test.ts runs them against a real sandbox and
 * log): a name a secret-carrying call made reaches a record only keyed, a name that existed
 * before stays clear, a digest is keyed, lookups hash the candidate and its ancestors, and
 * past the bounds the anchors are held as a whole.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  heldLookup,
  keyDigest,
  MAX_HELD_NAMES,
  nameKey,
  parseHeld,
  sameDigest,
  sealWrites,
} from "./held-names.ts";
import {
  describeTaint,
  heldFiles,
  holdsSecretUnder,
  isCleared,
  type TaintedFile,
  UNKNOWN,
  WRITABLE_ROOTS,
  withheldReasons,
  writtenBetween,
} from "./secret-taint.ts";

const KEY = nameKey(Buffer.alloc(32, 1));
const OTHER = nameKey(Buffer.alloc(32, 2));
const SECRET = "tok3n-Value-97531";
const D = (c: string): string => `file:${c.repeat(64)}`;
const DIR = "dir:d";

/** The records of a call from two scans, sealed against `taint`. */
function seal(
  before: Map<string, string>,
  after: Map<string, string>,
  taint: Map<string, TaintedFile> = new Map(),
): TaintedFile[] {
  return sealWrites(writtenBetween(before, after, "c1"), before, taint, KEY, WRITABLE_ROOTS);
}
const asMap = (files: TaintedFile[]) => new Map(files.map((f) => [f.path, f]));

describe("sealWrites", () => {
  const base = new Map([
    ["/tmp", DIR],
    ["/workspace", DIR],
    ["/workspace/a.txt", D("a")],
  ]);

  it("keys a name the call made; a name that existed before stays clear; digests are keyed", () => {
    const rev = [...SECRET].reverse().join("");
    const after = new Map([...base, [`/tmp/${rev}`, D("b")], ["/workspace/a.txt", D("c")]]);
    const files = seal(base, after);
    const text = JSON.stringify(files);
    assert.equal(text.includes(rev), false, text);
    assert.equal(text.includes("b".repeat(64)), false, "an unkeyed digest is recorded");
    const clear = files.find((f) => f.path === "/workspace/a.txt");
    assert.equal(clear?.digest, keyDigest(D("c"), KEY));
    const held = files.find((f) => parseHeld(f.path) !== undefined);
    assert.equal(parseHeld(held?.path ?? "")?.anchor, "/tmp");
    assert.equal(heldLookup(asMap(files), KEY)(`/tmp/${rev}`)?.callId, "c1");
    assert.equal(heldLookup(asMap(files), KEY)(`/tmp/${rev}x`), undefined);
    // A run key that did not make the entry cannot match it: its anchor is held whole.
    assert.equal(heldLookup(asMap(files), OTHER)("/tmp/anything")?.callId, "c1");
    assert.equal(heldLookup(asMap(files), OTHER)("/workspace/b.txt"), undefined);
  });

  it("one character per directory level: every level keyed, each anchored at the clear parent", () => {
    const chars = [...SECRET];
    const after = new Map(base);
    let p = "/tmp";
    for (const ch of chars) {
      p = `${p}/${ch}`;
      after.set(p, DIR);
    }
    const files = seal(base, after);
    assert.equal(files.length, chars.length);
    for (const f of files) assert.equal(f.path.startsWith("/tmp//"), true, f.path);
    assert.equal(heldLookup(asMap(files), KEY)(`${p}/deeper`)?.callId, "c1");
    assert.equal(holdsSecretUnder(asMap(files), "/tmp"), true);
    assert.equal(holdsSecretUnder(asMap(files), "/workspace"), false);
  });

  it("hostile names (control characters, escapes, 4 KiB) never reach a record", () => {
    const names = ["\u001b]52;c;cm0gLXJmIH4=\u0007", "a\rb\tc\u0085\u202e", "x".repeat(4096)];
    const after = new Map([...base, ...names.map((n) => [`/workspace/${n}`, D("e")] as const)]);
    const files = seal(base, after);
    const text = JSON.stringify(files);
    for (const n of names) assert.equal(text.includes(JSON.stringify(n).slice(1, -1)), false);
    for (const f of files) assert.equal(f.path.length < 100, true, f.path.slice(0, 100));
  });

  it("a changed path under a name held by an earlier call stays keyed (a baseline name is not enough)", () => {
    const first = seal(
      base,
      new Map([...base, [`/tmp/${SECRET}`, DIR], [`/tmp/${SECRET}/f`, D("a")]]),
    );
    const taint = asMap(first);
    const now = new Map([...base, [`/tmp/${SECRET}`, DIR], [`/tmp/${SECRET}/f`, D("a")]]);
    const second = sealWrites(
      writtenBetween(now, new Map([...now, [`/tmp/${SECRET}/f`, D("b")]]), "c2"),
      now,
      taint,
      KEY,
      WRITABLE_ROOTS,
    );
    assert.equal(JSON.stringify(second).includes(SECRET), false, JSON.stringify(second));
    assert.equal(second.length, 1);
    assert.equal(parseHeld(second[0]?.path ?? "")?.anchor, "/tmp");
  });

  it("names under a root a failed scan holds are keyed: that call's names were never recorded", () => {
    const taint = new Map([["/tmp", { path: "/tmp", digest: UNKNOWN, before: "", callId: "c0" }]]);
    const now = new Map([...base, [`/tmp/${SECRET}`, D("a")]]);
    const files = sealWrites(
      writtenBetween(now, new Map([...now, [`/tmp/${SECRET}`, D("b")]]), "c2"),
      now,
      taint,
      KEY,
      WRITABLE_ROOTS,
    );
    assert.equal(JSON.stringify(files).includes(SECRET), false);
  });

  it(`past ${MAX_HELD_NAMES} records, each new subtree is held whole by its keyed name (npm ci's node_modules)`, () => {
    const after = new Map(base);
    after.set("/workspace/node_modules", DIR);
    for (let i = 0; i <= MAX_HELD_NAMES; i++) after.set(`/workspace/node_modules/p${i}`, D("f"));
    const files = seal(base, after);
    assert.equal(files.length, 1, JSON.stringify(files.slice(0, 3)));
    const [tree] = files;
    assert.equal(tree?.digest, UNKNOWN);
    assert.equal(parseHeld(tree?.path ?? "")?.anchor, "/workspace");
    const taint = asMap(files);
    assert.equal(heldLookup(taint, KEY)("/workspace/node_modules/p7/index.js"), tree);
    assert.equal(
      heldLookup(taint, KEY)("/workspace/a.txt"),
      undefined,
      "the rest of the workspace is free",
    );
  });

  it(`past ${MAX_HELD_NAMES} new subtrees the anchors are held as a whole (UNKNOWN): bounded records`, () => {
    const after = new Map(base);
    after.set("/workspace/d", DIR);
    base.set("/workspace/d", DIR);
    for (let i = 0; i <= MAX_HELD_NAMES; i++) after.set(`/workspace/d/${SECRET}${i}`, D("f"));
    const files = seal(base, after);
    base.delete("/workspace/d");
    assert.deepEqual(
      files.map((f) => [f.path, f.digest]),
      [["/workspace/d", UNKNOWN]],
    );
    const taint = asMap(files);
    assert.equal(heldLookup(taint, KEY)(`/workspace/d/${SECRET}0`)?.path, "/workspace/d");
    assert.equal(isCleared(files[0] as TaintedFile, new Map(), KEY), false);
    // A later call's names under it stay keyed too.
    const now = new Map([...base, ["/workspace/d", DIR], [`/workspace/d/${SECRET}0`, D("f")]]);
    const later = sealWrites(
      writtenBetween(now, new Map([...now, [`/workspace/d/${SECRET}0`, D("g")]]), "c2"),
      now,
      taint,
      KEY,
      WRITABLE_ROOTS,
    );
    assert.equal(JSON.stringify(later).includes(SECRET), false);
  });
});

describe("what a person and the log are shown", () => {
  const base = new Map([
    ["/workspace", DIR],
    ["/workspace/src", DIR],
  ]);
  const files = seal(base, new Map([...base, [`/workspace/src/${SECRET}`, D("a")]]));
  const taint = asMap(files);

  it("a preview counts held names per anchor and names none", () => {
    const line = describeTaint(taint);
    assert.equal(line.includes(SECRET), false, line);
    assert.match(line, /1 new path in \/workspace\/src \(names held; call c1\)/);
    assert.deepEqual(heldFiles(taint), ["/workspace/src/… (1 name held)"]);
  });

  it("the patch withholds a held name's file and names only its anchor", () => {
    const w = withheldReasons(taint, KEY)(`src/${SECRET}`);
    assert.match(w?.reason ?? "", /holds a secret/);
    assert.equal(w?.anchor, "/workspace/src");
    assert.equal(withheldReasons(taint, KEY)("src/other"), undefined);
  });

  it("a held name is cleared only by a scan that finds it gone (found by its keyed hash)", () => {
    const f = files[0] as TaintedFile;
    const byMac = new Map([[KEY.mac(`/workspace/src/${SECRET}`), D("a")]]);
    assert.equal(isCleared(f, new Map(), KEY, byMac), false, "still there");
    assert.equal(isCleared(f, new Map(), KEY, new Map()), true, "gone");
    const foreign = { ...f, path: f.path.replace(KEY.id, OTHER.id) };
    assert.equal(isCleared(foreign, new Map(), KEY, new Map()), false, "another key's entry stays");
    assert.equal(
      heldLookup(new Map([[foreign.path, foreign]]), KEY)("/workspace/src/anything")?.callId,
      "c1",
    );
  });

  it("keyed digests compare with scans; the key never prints", () => {
    assert.equal(sameDigest(keyDigest(D("a"), KEY), D("a"), KEY), true);
    assert.equal(sameDigest(keyDigest(D("a"), KEY), D("b"), KEY), false);
    assert.equal(sameDigest(D("a"), D("a"), KEY), true, "a record from before keying");
    assert.equal(keyDigest(UNKNOWN, KEY), UNKNOWN);
    assert.equal(JSON.stringify({ KEY }).includes("0101"), false);
    assert.equal(`${KEY}`.includes("0101"), false);
  });
});

describe("the bounds keep a record inside one event", () => {
  it("many changed files with clear names (and new ones): every root written under is held whole", () => {
    const before = new Map<string, string>([
      ["/workspace", DIR],
      ["/data", DIR],
    ]);
    for (let i = 0; i < MAX_HELD_NAMES + 10; i++) before.set(`/workspace/f${i}`, D("a"));
    const after = new Map(before);
    for (let i = 0; i < MAX_HELD_NAMES + 10; i++) after.set(`/workspace/f${i}`, D("b"));
    after.set(`/data/${SECRET}`, D("c"));
    const files = seal(before, after);
    assert.deepEqual(files.map((f) => [f.path, f.digest]).sort(), [
      ["/data", UNKNOWN],
      ["/workspace", UNKNOWN],
    ]);
    assert.equal(heldLookup(asMap(files), KEY)(`/data/${SECRET}`)?.path, "/data");
  });

  it("long names within the count still fit: anchors held whole past the byte bound", () => {
    const before = new Map([["/tmp", DIR]]);
    const after = new Map(before);
    for (let i = 0; i < MAX_HELD_NAMES; i++) after.set(`/tmp/${"n".repeat(200)}${i}`, D("a"));
    const files = seal(before, after);
    const bytes = JSON.stringify(files).length;
    assert.equal(bytes < 512 * 1024, true, `${bytes} bytes`);
  });
});
