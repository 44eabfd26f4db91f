/**
 * Held records alone (attack-secret-path-name.test.ts and attack-secret-record-shape.test.ts
 * run them against a real sandbox and log): every path of a secret-carrying call reaches a
 * record only keyed under its root, digests bound to their path, each root's records padded
 * to a power of two; lookups hash the candidate and its ancestors; past the bounds top-level
 * entries, then roots, are held as a whole.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  bindDigest,
  heldLookup,
  keyDigest,
  nameKey,
  parseHeld,
  RECORDS_PER_ROOT,
  sameDigest,
  sealWrites,
} from "./held-names.ts";
import {
  describeTaint,
  GONE,
  heldFiles,
  holdsSecretUnder,
  isCleared,
  type TaintedFile,
  WRITABLE_ROOTS,
  writtenBetween,
} from "./secret-taint.ts";

const KEY = nameKey(Buffer.alloc(32, 1));
const OTHER = nameKey(Buffer.alloc(32, 2));
const SECRET = "tok3n-Value-97531";
const D = (c: string): string => `file:${c.repeat(64)}`;
const DIR = "dir:d";

/** The records of a call from two scans. */
function seal(
  before: Map<string, string>,
  after: Map<string, string>,
  callId = "c1",
): TaintedFile[] {
  return sealWrites(writtenBetween(before, after, callId), KEY, WRITABLE_ROOTS, callId);
}
const asMap = (files: TaintedFile[]) => new Map(files.map((f) => [f.path, f]));
/** What a reader of the log sees of a record set: per root, how many and of which form. */
const shape = (files: TaintedFile[]): string[] =>
  files
    .map((f) => {
      const h = parseHeld(f.path);
      return `${h?.anchor ?? f.path}|${h?.mac.length ?? 0}|${f.digest.slice(0, 2)}${f.digest.length}|${f.before.slice(0, 2)}${f.before.length}`;
    })
    .sort();

describe("sealWrites", () => {
  const base = new Map([
    ["/tmp", DIR],
    ["/workspace", DIR],
    ["/workspace/a.txt", D("a")],
  ]);

  it("keys every path under its root (made or existing); digests bound; the rest is padding", () => {
    const rev = [...SECRET].reverse().join("");
    const after = new Map([...base, [`/tmp/${rev}`, D("b")], ["/workspace/a.txt", D("c")]]);
    const files = seal(base, after);
    const text = JSON.stringify(files);
    assert.equal(text.includes(rev), false, text);
    assert.equal(text.includes("a.txt"), false, "an existing path is recorded in clear");
    assert.equal(text.includes("b".repeat(64)), false, "an unbound digest is recorded");
    assert.deepEqual([...new Set(files.map((f) => parseHeld(f.path)?.anchor))].sort(), [
      "/",
      "/cache",
      "/dev/shm",
      "/tmp",
      "/workspace",
    ]);
    assert.equal(files.length, 5 * RECORDS_PER_ROOT, "every root, written under or not");
    const look = heldLookup(asMap(files), KEY);
    assert.equal(look(`/tmp/${rev}`)?.callId, "c1");
    assert.equal(look("/workspace/a.txt")?.callId, "c1");
    assert.equal(look(`/tmp/${rev}x`), undefined);
    assert.equal(look("/workspace/b.txt"), undefined);
    // A run key that did not make the entry cannot match it: its root is held whole.
    assert.equal(heldLookup(asMap(files), OTHER)("/tmp/anything")?.callId, "c1");
  });

  it("the record's shape does not follow which existing files, or how many names, the value picked", () => {
    const before = new Map<string, string>([
      ["/workspace", DIR],
      ["/workspace/b", DIR],
    ]);
    for (let i = 0; i < 16; i++) before.set(`/workspace/b/${i}`, D("a"));
    const remove = (bits: number[]) => {
      const after = new Map(before);
      for (const i of bits) after.delete(`/workspace/b/${i}`);
      return seal(before, after);
    };
    const change = (bits: number[]) => {
      const after = new Map(before);
      for (const i of bits) after.set(`/workspace/b/${i}`, D("z"));
      return seal(before, after);
    };
    const make = (n: number) => {
      const after = new Map(before);
      for (let i = 0; i < n; i++) after.set(`/workspace/b/new${i}`, D("a"));
      return seal(before, after);
    };
    // Different subsets, removals or changes or new files, any count, nothing: one shape.
    const one = shape(remove([1, 3, 5, 7, 9]));
    assert.deepEqual(shape(remove([0, 2, 4, 6, 8])), one);
    assert.deepEqual(shape(change([0, 2, 4, 6, 8])), one);
    assert.deepEqual(shape(remove([0, 1, 2, 3, 4, 5, 6])), one);
    assert.deepEqual(shape(make(6)), one);
    assert.deepEqual(shape(make(1)), one);
    assert.deepEqual(shape(make(40)), one, "past the bound: the root held whole, same shape");
    assert.deepEqual(shape(seal(before, before)), one, "a call that wrote nothing");
    const elsewhere = new Map([...before, ["/dev/shm/s", D("a")], ["/home/agent/.x", D("a")]]);
    assert.deepEqual(shape(seal(before, elsewhere)), one, "which roots a call wrote under");
    // Equal contents do not look equal (a digest is bound to its path).
    const digests = make(6).map((f) => f.digest);
    assert.equal(new Set(digests).size, digests.length);
  });

  it('every root gets RECORDS_PER_ROOT records, "/" too, however many top-level entries', () => {
    const before = new Map([["/workspace", DIR]]);
    for (const n of [0, 1, RECORDS_PER_ROOT, RECORDS_PER_ROOT + 1, 40]) {
      const after = new Map(before);
      for (let i = 0; i < n; i++) after.set(`/vol${i}/f`, D("a"));
      const files = seal(before, after);
      const under = files.filter((f) => parseHeld(f.path)?.anchor === "/");
      assert.equal(under.length, RECORDS_PER_ROOT, `${n} volumes`);
      assert.equal(files.length, 5 * RECORDS_PER_ROOT);
      if (n > 0) assert.equal(heldLookup(asMap(files), KEY)(`/vol${n - 1}/f`)?.callId, "c1");
    }
  });

  it("one character per directory level: every level keyed under the root", () => {
    const after = new Map(base);
    let p = "/tmp";
    for (const ch of SECRET) {
      p = `${p}/${ch}`;
      after.set(p, DIR);
    }
    const files = seal(base, after);
    assert.equal(files.length, 5 * RECORDS_PER_ROOT);
    const tmp = files.filter((f) => f.path.startsWith("/tmp//"));
    assert.equal(tmp.length, RECORDS_PER_ROOT);
    for (const f of tmp) assert.equal(f.path.startsWith(`/tmp//${KEY.id}.`), true, f.path);
    assert.equal(heldLookup(asMap(files), KEY)(`${p}/deeper`)?.callId, "c1");
    assert.equal(holdsSecretUnder(asMap(files), "/tmp"), true);
  });

  it("hostile names (control characters, escapes, 4 KiB) never reach a record", () => {
    const names = ["\u001b]52;c;cm0gLXJmIH4=\u0007", "a\rb\tc\u0085\u202e", "x".repeat(4096)];
    const after = new Map([...base, ...names.map((n) => [`/workspace/${n}`, D("e")] as const)]);
    const files = seal(base, after);
    const text = JSON.stringify(files);
    for (const n of names) assert.equal(text.includes(JSON.stringify(n).slice(1, -1)), false);
    for (const f of files) assert.equal(f.path.length < 100, true, f.path.slice(0, 100));
  });

  it(`past ${RECORDS_PER_ROOT} paths, each top-level entry is held whole by its keyed name (npm ci's node_modules)`, () => {
    const after = new Map(base);
    after.set("/workspace/node_modules", DIR);
    for (let i = 0; i <= 1000; i++) after.set(`/workspace/node_modules/p${i}`, D("f"));
    const files = seal(base, after);
    assert.equal(files.length, 5 * RECORDS_PER_ROOT, JSON.stringify(files.slice(0, 3)));
    const taint = asMap(files);
    assert.equal(heldLookup(taint, KEY)("/workspace/node_modules/p7/index.js")?.callId, "c1");
    assert.equal(heldLookup(taint, KEY)("/workspace/a.txt"), undefined, "the rest is free");
    assert.equal(JSON.stringify(files).includes("node_modules"), false);
    // Held whole: no scan ends it, not even its absence (which of its paths the call
    // removed is the program's choice).
    const top = files.find((f) => f.path.endsWith(`.${KEY.mac("/workspace/node_modules")}`));
    const scan = new Map([["/workspace/node_modules", DIR]]);
    const byMac = new Map([[KEY.mac("/workspace/node_modules"), DIR]]);
    assert.equal(isCleared(top as TaintedFile, scan, KEY, byMac), false);
    assert.equal(isCleared(top as TaintedFile, new Map(), KEY, new Map()), false);
  });

  it('past that, the root itself is held whole; other mounts\' top-level entries under "/"', () => {
    const before = new Map<string, string>([
      ["/workspace", DIR],
      ["/data", DIR],
    ]);
    for (let i = 0; i < 1010; i++) before.set(`/workspace/f${i}`, D("a"));
    const after = new Map(before);
    for (let i = 0; i < 1010; i++) after.set(`/workspace/f${i}`, D("b"));
    after.set(`/data/${SECRET}`, D("c"));
    const files = seal(before, after);
    assert.equal(files.length, 5 * RECORDS_PER_ROOT);
    assert.equal(JSON.stringify(files).includes(SECRET), false);
    const look = heldLookup(asMap(files), KEY);
    assert.equal(look(`/data/${SECRET}`)?.path.startsWith(`//${KEY.id}.`), true);
    assert.equal(look("/workspace/never-written")?.callId, "c1", "the whole root");
    const root = look("/workspace/x") as TaintedFile;
    const byMac = new Map([[KEY.mac("/workspace"), DIR]]);
    assert.equal(isCleared(root, new Map([["/workspace", DIR]]), KEY, byMac), false);
  });

  it("a record always fits one event", () => {
    const before = new Map([["/tmp", DIR]]);
    const after = new Map(before);
    for (let i = 0; i < 900; i++) after.set(`/tmp/${"n".repeat(200)}${i}`, D("a"));
    const bytes = JSON.stringify(seal(before, after)).length;
    assert.equal(bytes < 512 * 1024, true, `${bytes} bytes`);
  });
});

describe("a sealed record ends only by a scan", () => {
  const before = new Map([
    ["/workspace", DIR],
    ["/workspace/old", D("a")],
    ["/workspace/gone", D("b")],
  ]);
  const after = new Map([
    ["/workspace", DIR],
    ["/workspace/old", D("c")],
    ["/workspace/new", D("d")],
  ]);
  const files = seal(before, after);
  const byPath = (p: string) => files.find((f) => f.path.endsWith(`.${KEY.mac(p)}`)) as TaintedFile;
  const scanOf = (m: Map<string, string>) => new Map([...m].map(([p, d]) => [KEY.mac(p), d]));

  it("new: cleared when gone; changed: when back as before; removed: only when back as before", () => {
    const still = scanOf(after);
    for (const p of ["/workspace/old", "/workspace/new", "/workspace/gone"])
      assert.equal(isCleared(byPath(p), new Map(), KEY, still), false, p);
    const restored = scanOf(before);
    assert.equal(isCleared(byPath("/workspace/old"), new Map(), KEY, restored), true);
    assert.equal(isCleared(byPath("/workspace/new"), new Map(), KEY, restored), true);
    assert.equal(isCleared(byPath("/workspace/gone"), new Map(), KEY, restored), true);
    const other = scanOf(
      new Map([
        ["/workspace/gone", D("x")],
        ["/workspace/old", D("x")],
      ]),
    );
    assert.equal(isCleared(byPath("/workspace/gone"), new Map(), KEY, other), false);
    assert.equal(isCleared(byPath("/workspace/old"), new Map(), KEY, other), false);
    assert.equal(
      byPath("/workspace/gone").digest,
      bindDigest("c1", KEY.mac("/workspace/gone"), GONE, KEY),
    );
  });

  it("padding ends at the first scan; another key's entry never does", () => {
    const real = new Set(["/workspace/old", "/workspace/new", "/workspace/gone"].map(byPath));
    const pad = files.filter((f) => !real.has(f));
    assert.equal(pad.length, 5 * RECORDS_PER_ROOT - 3);
    for (const p of pad) assert.equal(isCleared(p, new Map(), KEY, scanOf(after)), true);
    const f = byPath("/workspace/new");
    const foreign = { ...f, path: f.path.replace(KEY.id, OTHER.id) };
    assert.equal(isCleared(foreign, new Map(), KEY, new Map()), false);
  });

  it("records of earlier versions (k: digests, clear paths) still compare; the key never prints", () => {
    assert.equal(sameDigest(keyDigest(D("a"), KEY), D("a"), KEY), true);
    assert.equal(sameDigest(keyDigest(D("a"), KEY), D("b"), KEY), false);
    assert.equal(sameDigest(D("a"), D("a"), KEY), true, "a record from before keying");
    const old = {
      path: "/workspace/x",
      digest: keyDigest(D("b"), KEY),
      before: keyDigest(D("a"), KEY),
      callId: "c0",
    };
    assert.equal(isCleared(old, new Map([["/workspace/x", D("a")]]), KEY), true);
    assert.equal(isCleared(old, new Map([["/workspace/x", D("b")]]), KEY), false);
    assert.equal(JSON.stringify({ KEY }).includes("0101"), false);
    assert.equal(`${KEY}`.includes("0101"), false);
  });
});

describe("what a person and the log are shown", () => {
  const base = new Map([
    ["/workspace", DIR],
    ["/workspace/src", DIR],
  ]);
  const files = seal(base, new Map([...base, [`/workspace/src/${SECRET}`, D("a")]]));
  const taint = asMap(files);

  it("a preview names the roots that hold records, without a count or a name", () => {
    const line = describeTaint(taint);
    assert.equal(line.includes(SECRET), false, line);
    assert.doesNotMatch(line, /\d+ (new )?paths?|names? held\)/);
    assert.match(
      line,
      /paths in \/workspace, \/tmp, \/cache, \/dev\/shm and elsewhere \(which, where and how many: held\)/,
    );
    // Every root has records (padding included): which ones a call wrote under is not told.
    assert.deepEqual(heldFiles(taint).sort(), [
      "/cache/… (names held)",
      "/dev/shm/… (names held)",
      "/tmp/… (names held)",
      "/workspace/… (names held)",
      "/… (names held)",
    ]);
  });
});
