/**
 * The streaming workspace normaliser against real tar and gzip bytes: what it writes (owner
 * 1000, no set-id bits, parents listed, deterministic uploads, snapshots keeping file times
 * to the nanosecond), every hostile entry, time and format it
 * refuses, the limits (unpacked bytes, entries, paths), the lenient mode for sandbox
 * exports, and that memory stays bounded by a chunk for a 1 GiB entry.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import * as tar from "tar-stream";
import { isAgentdError } from "../errors.ts";
import { packWorkspace, readWorkspaceArchive } from "./workspace-archive.ts";
import { type ArchiveLimits, SANDBOX_EXPORT_LIMITS } from "./workspace-rules.ts";
import { normaliseWorkspaceStream, readArchiveEntries } from "./workspace-stream.ts";

type Entry = Partial<tar.Header> & { name: string; data?: string | Buffer };

/** A tar of `entries`, built with tar-stream (the headers as given, owners and modes too). */
async function tarOf(entries: readonly Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on("end", () => r()));
  for (const { data, ...h } of entries) {
    if (data === undefined) pack.entry({ mode: 0o644, ...h });
    else pack.entry({ mode: 0o644, ...h }, data);
  }
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

/** A raw ustar header block (for what tar-stream will not write: 'S', floods of PAX). */
function rawHeader(name: string, size: number, typeflag: string): Buffer {
  const b = Buffer.alloc(512);
  b.write(name, 0, 100, "utf8");
  b.write("0000644\0", 100);
  b.write("0001750\0", 108);
  b.write("0001750\0", 116);
  b.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  b.write("00000000000\0", 136);
  b.write(typeflag, 156);
  b.write("ustar\0", 257);
  b.write("00", 263);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  b.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return b;
}

const END = Buffer.alloc(1024);

async function normalise(input: Uint8Array, limits: ArchiveLimits = {}): Promise<Buffer> {
  return collect(normaliseWorkspaceStream([input], limits));
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const c of chunks) out.push(c);
  return Buffer.concat(out);
}

/** The headers of a tar (content skipped). */
async function headersOf(t: Buffer): Promise<tar.Header[]> {
  const out: tar.Header[] = [];
  const ex = tar.extract();
  const done = (async () => {
    for await (const e of ex) {
      out.push(e.header);
      for await (const _ of e);
    }
  })();
  ex.end(t);
  await done;
  return out;
}

async function refused(
  input: Uint8Array | AsyncIterable<Uint8Array>,
  code: "EVALIDATION" | "ETOOLARGE",
  re: RegExp,
  limits: ArchiveLimits = {},
): Promise<void> {
  const source = input instanceof Uint8Array ? [input] : input;
  await assert.rejects(
    (async () => {
      for await (const _ of normaliseWorkspaceStream(source, limits));
    })(),
    (e: unknown) => {
      assert.ok(isAgentdError(e, code), `expected ${code}, got ${String(e)}`);
      assert.equal(e.field, "workspace_tar");
      assert.match(e.message, /^workspace_tar: /);
      assert.match(e.message, re);
      return true;
    },
  );
}

describe("normaliseWorkspaceStream: the normalised form", () => {
  it("owner 1000, no set-id or sticky bits, parents listed first, mtime 0", async () => {
    const input = await tarOf([
      { name: "./bin/tool", mode: 0o4755, uid: 0, gid: 0, uname: "root", data: "#!/bin/sh\n" },
      { name: "src/deep/a.txt", mode: 0o2640, uid: 501, data: "a" },
      { name: "src/", type: "directory", mode: 0o1777 },
      { name: "src/link", type: "symlink", linkname: "deep/a.txt" },
    ]);
    const out = await normalise(gzipSync(input));
    const hs = await headersOf(out);
    assert.deepEqual(
      hs.map((h) => [h.name, h.type, h.mode.toString(8), h.uid, h.gid, h.mtime.getTime()]),
      [
        ["bin/", "directory", "755", 1000, 1000, 0],
        ["bin/tool", "file", "755", 1000, 1000, 0],
        ["src/", "directory", "755", 1000, 1000, 0],
        ["src/deep/", "directory", "755", 1000, 1000, 0],
        ["src/deep/a.txt", "file", "640", 1000, 1000, 0],
        ["src/link", "symlink", "777", 1000, 1000, 0],
      ],
    );
    // The in-memory path (read, then pack) gives the very same bytes.
    assert.ok(out.equals(await packWorkspace(await readWorkspaceArchive(input))));
    // Same tree, same bytes: the digest of a workspace does not depend on who packed it.
    assert.ok(out.equals(await normalise(input)));
  });

  it("a tar inside the tar is a file like any other, not unpacked", async () => {
    const inner = await tarOf([{ name: "../../evil", data: "x" }]);
    const out = await normalise(await tarOf([{ name: "vendor/inner.tar", data: inner }]));
    const files = await readWorkspaceArchive(out);
    const stored = files.find((f) => f.path === "vendor/inner.tar");
    assert.ok(stored?.data?.equals(inner));
  });

  it("a deep path within PATH_MAX is kept, its 1,500 implied parents counted", async () => {
    const deep = `${"d/".repeat(1500)}leaf.txt`;
    const out = await normalise(await tarOf([{ name: deep, data: "deep" }]));
    const hs = await headersOf(out);
    assert.equal(hs.length, 1501);
    assert.equal(hs.at(-1)?.name, deep);
    await refused(await tarOf([{ name: deep, data: "deep" }]), "ETOOLARGE", /1000 entries/, {
      maxEntries: 1000,
    });
  });
});

describe("normaliseWorkspaceStream: file times", () => {
  const NOW = 1_750_000_000_000; // the clock of the snapshots below, ms
  const keep = (input: Uint8Array, now = NOW) =>
    collect(
      normaliseWorkspaceStream([input], SANDBOX_EXPORT_LIMITS, { keepTimes: true, now: () => now }),
    );
  /** [name, seconds, PAX mtime] of each header. */
  const timesOf = async (t: Buffer) =>
    (await headersOf(t)).map((h) => [
      h.name,
      h.mtime.getTime() / 1000,
      (h.pax as Record<string, string> | null)?.mtime ?? null,
    ]);

  it("a snapshot keeps each entry's time to the nanosecond, directories and links too", async () => {
    // As GNU tar --format=posix writes them: a PAX mtime record before each entry.
    const input = await tarOf([
      {
        name: "./src/",
        type: "directory",
        mtime: new Date(1_700_000_001_000),
        pax: { mtime: "1700000001.5" },
      },
      {
        name: "./src/a.py",
        mtime: new Date(1_700_000_000_000),
        pax: { mtime: "1700000000.123456789" },
        data: "VALUE = 1\n",
      },
      {
        name: "./src/b.o",
        mtime: new Date(1_700_000_000_000),
        pax: { mtime: "1700000000.2" },
        data: "o",
      },
      { name: "./src/l", type: "symlink", linkname: "a.py", mtime: new Date(1_600_000_000_000) },
      { name: "./old.txt", mtime: new Date(1_234_567_890_000), data: "busybox: seconds only" },
    ]);
    const out = await keep(input);
    assert.deepEqual(await timesOf(out), [
      ["src/", 1700000001, "1700000001.5"],
      ["src/a.py", 1700000000, "1700000000.123456789"],
      ["src/b.o", 1700000000, "1700000000.2"],
      ["src/l", 1600000000, null],
      ["old.txt", 1234567890, null],
    ]);
    // Read again (a restore, a later snapshot of the restored workspace): the same times.
    const again = [];
    for await (const e of readArchiveEntries([out], SANDBOX_EXPORT_LIMITS))
      again.push([e.path, e.mtime]);
    assert.deepEqual(again, [
      ["src", { sec: 1700000001, nsec: 500000000 }],
      ["src/a.py", { sec: 1700000000, nsec: 123456789 }],
      ["src/b.o", { sec: 1700000000, nsec: 200000000 }],
      ["src/l", { sec: 1600000000, nsec: 0 }],
      ["old.txt", { sec: 1234567890, nsec: 0 }],
    ]);
    // Content and names are untouched by the PAX records.
    const files = await readWorkspaceArchive(out, SANDBOX_EXPORT_LIMITS);
    assert.deepEqual(
      files.map((f) => [f.path, f.data?.toString() ?? f.linkname]),
      [
        ["src", undefined],
        ["src/a.py", "VALUE = 1\n"],
        ["src/b.o", "o"],
        ["src/l", "a.py"],
        ["old.txt", "busybox: seconds only"],
      ],
    );
  });

  it("an upload keeps mtime 0: the same tree packed at other times gives the same bytes", async () => {
    const at = (ms: number, ns: string) =>
      tarOf([
        {
          name: "d/",
          type: "directory",
          mtime: new Date(ms),
          pax: { mtime: `${ms / 1000}.${ns}` },
        },
        {
          name: "d/f.txt",
          mtime: new Date(ms),
          pax: { mtime: `${ms / 1000}.${ns}` },
          data: "same",
        },
      ]);
    const one = await normalise(await at(1_700_000_000_000, "1"));
    const two = await normalise(await at(1_710_000_000_000, "999"));
    assert.ok(one.equals(two), "uploads of the same tree are byte-identical");
    assert.deepEqual(await timesOf(one), [
      ["d/", 0, null],
      ["d/f.txt", 0, null],
    ]);
  });

  it("hostile times are clamped, never refused: future, negative, huge, malformed PAX values", async () => {
    const input = await tarOf([
      {
        name: "future",
        mtime: new Date(1_760_000_000_000),
        pax: { mtime: "1760000000.5" },
        data: "x",
      },
      { name: "far", mtime: new Date(0), pax: { mtime: "9".repeat(60) }, data: "x" },
      { name: "negative", mtime: new Date(0), pax: { mtime: "-86400.5" }, data: "x" },
      { name: "malformed", mtime: new Date(1_650_000_000_000), pax: { mtime: "12e99" }, data: "x" },
      {
        name: "oversized",
        mtime: new Date(1_650_000_000_000),
        pax: { mtime: "1".repeat(100_000) },
        data: "x",
      },
    ]);
    // A negative ustar time as GNU tar writes it (base-256, 0xff first): after the epoch clamp, 0.
    const neg = rawHeader("neg-ustar", 0, "0");
    neg.fill(0xff, 136, 148);
    neg.fill(0x20, 148, 156);
    let sum = 0;
    for (const x of neg) sum += x;
    neg.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
    const withNeg = Buffer.concat([input.subarray(0, input.byteLength - 1024), neg, END]);
    assert.deepEqual(await timesOf(await keep(withNeg)), [
      ["future", 1750000000, "1750000000.000999999"],
      ["far", 1750000000, "1750000000.000999999"],
      ["negative", 0, null],
      ["malformed", 1650000000, null],
      ["oversized", 1650000000, null],
      ["neg-ustar", 0, null],
    ]);
  });

  it("malformed PAX records (wrong lengths, no '=', binary) leave the ustar time, never fail", async () => {
    const withPax = (records: string | Buffer, name: string) => {
      const data = Buffer.from(records);
      const padded = Buffer.concat([data, Buffer.alloc((512 - (data.byteLength % 512)) % 512)]);
      const file = rawHeader(name, 1, "0");
      // ustar mtime 1650000000 (octal), checksum recomputed.
      file.write(`${(1_650_000_000).toString(8).padStart(11, "0")}\0`, 136);
      file.fill(0x20, 148, 156);
      let sum = 0;
      for (const x of file) sum += x;
      file.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
      const body = Buffer.alloc(512);
      body.write("x");
      return [rawHeader("PaxHeader", data.byteLength, "x"), padded, file, body];
    };
    const input = Buffer.concat([
      ...withPax("5 mtime=1700000000.5\n", "short"),
      ...withPax("9999 mtime=1700000000.5\n", "long"),
      ...withPax("25 mtime1700000000.5xxxxx\n", "no-equals"),
      ...withPax(Buffer.from([0x31, 0x35, 0x20, 0xff, 0xfe, 0x3d, 0x00, 0x80, 0x0a]), "binary"),
      ...withPax("22 mtime=1700000000.5\n12 mtime=-1\n", "last-wins"),
      ...withPax("22 mtime=1700000000.5\n", "well-formed"),
      END,
    ]);
    assert.deepEqual(await timesOf(await keep(input)), [
      ["short", 1650000000, null],
      ["long", 1650000000, null],
      ["no-equals", 1650000000, null],
      ["binary", 1650000000, null],
      ["last-wins", 0, null],
      ["well-formed", 1700000000, "1700000000.5"],
    ]);
  });

  it("a masked entry (mapEntry) keeps its time", async () => {
    const input = await tarOf([
      {
        name: "k.txt",
        mtime: new Date(1_700_000_000_000),
        pax: { mtime: "1700000000.75" },
        data: "abc",
      },
    ]);
    const out = await collect(
      normaliseWorkspaceStream([input], SANDBOX_EXPORT_LIMITS, {
        keepTimes: true,
        now: () => NOW,
        mapEntry: (e) => ({ ...e, path: "m.txt" }),
      }),
    );
    assert.deepEqual(await timesOf(out), [["m.txt", 1700000000, "1700000000.75"]]);
  });
});

describe("normaliseWorkspaceStream: hostile archives are refused, naming the entry", () => {
  const cases: [string, () => Promise<Uint8Array>, RegExp][] = [
    ["tar-slip", () => tarOf([{ name: "src/../../evil.sh", data: "x" }]), /tar-slip/],
    ["absolute path", () => tarOf([{ name: "/etc/cron.d/evil", data: "x" }]), /absolute path/],
    [
      "NUL in a name (PAX path)",
      () => tarOf([{ name: "a", pax: { path: "a\0b" }, data: "x" }]),
      /NUL/,
    ],
    [
      "absolute symlink",
      () => tarOf([{ name: "l", type: "symlink", linkname: "/etc/passwd" }]),
      /symlink "l" points to an absolute path/,
    ],
    [
      "symlink out of the tree",
      () => tarOf([{ name: "a/l", type: "symlink", linkname: "../../x" }]),
      /outside the workspace/,
    ],
    ["hard link", () => tarOf([{ name: "h", type: "link", linkname: "a" }]), /hard link/],
    [
      "character device",
      () => tarOf([{ name: "null", type: "character-device", devmajor: 1, devminor: 3 }]),
      /character-device/,
    ],
    ["fifo", () => tarOf([{ name: "p", type: "fifo" }]), /is a fifo/],
    [
      "a file twice",
      () =>
        tarOf([
          { name: "a", data: "1" },
          { name: "./a", data: "2" },
        ]),
      /"a" appears twice/,
    ],
    [
      "a file inside a file",
      () =>
        tarOf([
          { name: "a", data: "1" },
          { name: "a/b", data: "2" },
        ]),
      /inside "a", which is not a directory/,
    ],
    [
      "a file through a symlink",
      () =>
        tarOf([
          { name: "l", type: "symlink", linkname: "." },
          { name: "l/b", data: "2" },
        ]),
      /inside "l"/,
    ],
    ["a path over PATH_MAX", () => tarOf([{ name: "a/".repeat(2100), data: "x" }]), /4096 bytes/],
    [
      "a symlink target over PATH_MAX",
      () => tarOf([{ name: "l", type: "symlink", linkname: "a/".repeat(2100) }]),
      /target longer than 4096/,
    ],
    [
      "a GNU sparse file claiming 300 MiB",
      async () => Buffer.concat([rawHeader("big.img", 512, "S"), Buffer.alloc(512), END]),
      /"big.img" is an unsupported kind of entry/,
    ],
    [
      "a PAX sparse file claiming 300 MiB",
      () =>
        tarOf([
          {
            name: "GNUSparseFile.0/big.img",
            data: "1\n0\n512\n",
            pax: {
              "GNU.sparse.major": "1",
              "GNU.sparse.minor": "0",
              "GNU.sparse.realsize": String(300 * 1024 * 1024),
            },
          },
        ]),
      /sparse file/,
    ],
    [
      "text that is no tar",
      async () => Buffer.from("not a tar at all".repeat(64)),
      /not a tar archive/,
    ],
    [
      "gzip of text",
      async () => gzipSync(Buffer.from("not a tar".repeat(500))),
      /not a tar archive/,
    ],
    [
      "truncated gzip",
      async () => {
        const gz = gzipSync(await tarOf([{ name: "a", data: "x".repeat(100_000) }]));
        return gz.subarray(0, gz.length - 200);
      },
      /gzip data is corrupt or truncated/,
    ],
    [
      "truncated tar",
      async () => (await tarOf([{ name: "a", data: "x".repeat(10_000) }])).subarray(0, 4096),
      /corrupt tar/,
    ],
  ];
  for (const [name, make, re] of cases) {
    it(name, async () => refused(await make(), "EVALIDATION", re));
  }
});

describe("normaliseWorkspaceStream: limits", () => {
  const limits: ArchiveLimits = {
    maxUnpackedBytes: 8 * 1024 * 1024,
    maxEntries: 1000,
    settings: { unpackedBytes: "--max-workspace-bytes", entries: "--max-workspace-entries" },
  };

  it("an entry declared larger than the limit is refused before its content", async () => {
    let read = 0;
    async function* headerOnly(): AsyncGenerator<Uint8Array> {
      // A header claiming 300 MiB, then content that never ends: it must not be awaited.
      read++;
      yield rawHeader("zeros.bin", 300 * 1024 * 1024, "0");
      for (;;) {
        read++;
        yield Buffer.alloc(64 * 1024);
      }
    }
    await refused(
      headerOnly(),
      "ETOOLARGE",
      /8388608 bytes \(the server's --max-workspace-bytes\)/,
      limits,
    );
    assert.ok(read < 10, `read ${read} chunks of a refused entry`);
  });

  it("many files under the limit each, over it together: refused while streaming", async () => {
    const five = gzipSync(
      await tarOf([1, 2, 3, 4, 5].map((i) => ({ name: `z${i}`, data: Buffer.alloc(2 << 20) }))),
    );
    await refused(five, "ETOOLARGE", /exceeds the limit of 8388608 bytes/, limits);
  });

  it("a flood of PAX headers (no entries at all) hits the unpacked limit", async () => {
    async function* flood(): AsyncGenerator<Uint8Array> {
      const record = Buffer.alloc(512, 0);
      record.write("12 path=abc\n");
      for (;;) yield Buffer.concat([rawHeader("PaxHeader", 12, "x"), record]);
    }
    await refused(flood(), "ETOOLARGE", /--max-workspace-bytes/, limits);
  });

  it("20,000 empty files past a limit of 10,000: refused at the entry limit", async () => {
    // The server test sends 200,000 against the default 100,000; the mechanism is the same.
    async function* many(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 20_000; i += 100) {
        yield Buffer.concat(Array.from({ length: 100 }, (_, j) => rawHeader(`f${i + j}`, 0, "0")));
      }
      yield END;
    }
    await refused(
      many(),
      "ETOOLARGE",
      /more than 10000 entries \(the server's --max-workspace-entries\)/,
      { ...limits, maxEntries: 10_000 },
    );
  });

  it("the archive as given is capped too (maxArchiveBytes)", async () => {
    await refused(
      await tarOf([{ name: "a", data: Buffer.alloc(4096) }]),
      "ETOOLARGE",
      /larger than 1024 bytes/,
      { maxArchiveBytes: 1024 },
    );
  });
});

describe("normaliseWorkspaceStream: sandbox exports (lenient)", () => {
  it("keeps links as they are, skips hard links and devices, still owner 1000 without set-id", async () => {
    const input = await tarOf([
      { name: "./", type: "directory" },
      { name: "./abs", type: "symlink", linkname: "/etc/passwd" },
      { name: "./up", type: "symlink", linkname: "../../x" },
      { name: "./hard", type: "link", linkname: "abs" },
      { name: "./null", type: "character-device", devmajor: 1, devminor: 3 },
      { name: "./suid", mode: 0o6755, uid: 0, data: "x" },
    ]);
    const hs = await headersOf(await normalise(input, SANDBOX_EXPORT_LIMITS));
    assert.deepEqual(
      hs.map((h) => [h.name, h.type, h.linkname ?? null, h.mode.toString(8), h.uid]),
      [
        ["abs", "symlink", "/etc/passwd", "777", 1000],
        ["up", "symlink", "../../x", "777", 1000],
        ["suid", "file", null, "755", 1000],
      ],
    );
  });

  it("a snapshot (keepHardLinks) keeps a hard link to a file listed before it, nothing else", async () => {
    const input = await tarOf([
      { name: "./d/", type: "directory" },
      { name: "./d/bin", data: "ELF" },
      { name: "./abs", type: "symlink", linkname: "/etc" },
      { name: "./twin", type: "link", linkname: "./d/bin" },
      { name: "./deep/er/twin", type: "link", linkname: "d/bin" },
      { name: "./to-dir", type: "link", linkname: "d" },
      { name: "./to-symlink", type: "link", linkname: "abs" },
      { name: "./to-later", type: "link", linkname: "later" },
      { name: "./to-outside", type: "link", linkname: "../../etc/passwd" },
      { name: "./to-absolute", type: "link", linkname: "/etc/passwd" },
      { name: "./to-itself", type: "link", linkname: "to-itself" },
      { name: "./to-link", type: "link", linkname: "twin" },
      { name: "./later", data: "x" },
    ]);
    const kept = await headersOf(
      await normalise(input, { ...SANDBOX_EXPORT_LIMITS, keepHardLinks: true }),
    );
    assert.deepEqual(
      kept.map((h) => [h.name, h.type, h.linkname ?? null, h.uid]),
      [
        ["d/", "directory", null, 1000],
        ["d/bin", "file", null, 1000],
        ["abs", "symlink", "/etc", 1000],
        ["twin", "link", "d/bin", 1000],
        ["deep/", "directory", null, 1000],
        ["deep/er/", "directory", null, 1000],
        ["deep/er/twin", "link", "d/bin", 1000],
        ["later", "file", null, 1000],
      ],
    );
    // Without the option (a diff's read, an export normalised like an upload): skipped.
    const skipped = await headersOf(await normalise(input, SANDBOX_EXPORT_LIMITS));
    assert.ok(!skipped.some((h) => h.type === "link"));
    // An upload refuses them whatever the option says: lenient is what allows any.
    const upload = await tarOf([
      { name: "bin", data: "ELF" },
      { name: "twin", type: "link", linkname: "bin" },
    ]);
    await refused(upload, "EVALIDATION", /"twin" is a hard link/, { keepHardLinks: true });
  });

  it("a consumer that stops early stops the reading of its source", async () => {
    let stopped = false;
    async function* endless(): AsyncGenerator<Uint8Array> {
      try {
        yield rawHeader("big", 1024 ** 3, "0");
        for (;;) yield Buffer.alloc(64 * 1024, 1);
      } finally {
        stopped = true;
      }
    }
    let n = 0;
    for await (const c of normaliseWorkspaceStream(endless(), SANDBOX_EXPORT_LIMITS)) {
      n += c.byteLength;
      if (n > 1024 * 1024) break;
    }
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, true);
  });

  it("a 1 GiB entry streams through with peak RSS growth far below its size", async () => {
    const size = 1024 ** 3;
    // Fresh 64 KiB chunks, as Docker's archive stream and zlib hand them out: a normaliser
    // that kept any of them (or gathered the entry) would keep up to the whole GiB.
    async function* big(): AsyncGenerator<Uint8Array> {
      yield rawHeader("big.bin", size, "0");
      for (let n = 0; n < size; n += 64 * 1024) yield Buffer.alloc(64 * 1024, 7);
      yield END;
    }
    globalThis.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let peak = rssBefore;
    const hash = createHash("sha256");
    let out = 0;
    let n = 0;
    for await (const c of normaliseWorkspaceStream(big(), SANDBOX_EXPORT_LIMITS)) {
      out += c.byteLength;
      hash.update(c);
      // Sampled while it streams (the process's maxRSS would count earlier tests' peaks).
      if (++n % 256 === 0) peak = Math.max(peak, process.memoryUsage().rss);
    }
    const growth = peak - rssBefore;
    assert.equal(out, 512 + size + 1024);
    // Garbage chunks wait for a collection: growth is bounded by the GC, not by the GiB.
    assert.ok(growth < 96 * 1024 * 1024, `peak RSS grew by ${(growth / 1e6).toFixed(1)} MB`);
  });
});
