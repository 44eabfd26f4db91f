/**
 * FsArtifactStore on a real temporary directory: streamed writes are hashed on the way,
 * appear only once complete, leave nothing behind when refused (limit, source error,
 * abort) and never hold the blob in memory; errors name no host path.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { AgentdError, isAgentdError } from "../errors.ts";
import { runArtifactStoreConformance } from "./conformance.ts";
import { FsArtifactStore } from "./fs-artifact-store.ts";

let dir: string;
let store: FsArtifactStore;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "agentd-artifacts-"));
  store = new FsArtifactStore(dir);
});

after(() => rmSync(dir, { recursive: true, force: true }));

const sha256 = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");

/** Every file under the store, relative ("sha256/ab/…", "tmp/…"). */
function files(root = dir, rel = ""): string[] {
  return readdirSync(join(root, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(root, join(rel, e.name)) : [join(rel, e.name)],
  );
}

async function* chunks(n: number, size: number, fill = 1): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < n; i++) yield Buffer.alloc(size, (fill + i) & 0xff);
}

async function readAll(digest: string): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const c of store.read(digest)) out.push(c);
  return Buffer.concat(out);
}

describe("FsArtifactStore.putStream", () => {
  it("stores what the source yields under its sha256, small chunks and large", async () => {
    const parts = [
      Buffer.from("a"),
      Buffer.alloc(300 * 1024, 2),
      Buffer.from("tail"),
      Buffer.alloc(0),
    ];
    const info = await store.putStream(
      (async function* () {
        yield* parts;
      })(),
    );
    const whole = Buffer.concat(parts);
    assert.deepEqual(info, { digest: sha256(whole), size: whole.byteLength });
    assert.ok((await readAll(info.digest)).equals(whole));
    assert.deepEqual(await store.stat(info.digest), info);
  });

  it("the same content twice is a no-op; put() agrees with putStream()", async () => {
    const a = await store.putStream(chunks(3, 1000));
    const b = await store.putStream(chunks(3, 1000));
    assert.deepEqual(a, b);
    const whole = Buffer.concat([
      Buffer.alloc(1000, 1),
      Buffer.alloc(1000, 2),
      Buffer.alloc(1000, 3),
    ]);
    assert.deepEqual(await store.put(whole), a);
    assert.equal(files().filter((f) => f.includes(a.digest)).length, 1);
    assert.equal(files().filter((f) => f.startsWith("tmp")).length, 0);
  });

  it("over maxBytes: ETOOLARGE naming the limit, nothing stored, no temp file", async () => {
    const before = files();
    await assert.rejects(
      store.putStream(chunks(10, 1024), { maxBytes: 4096 }),
      (e: unknown) => isAgentdError(e, "ETOOLARGE") && /4096 bytes/.test((e as Error).message),
    );
    // Exactly at the limit is fine.
    const ok = await store.putStream(chunks(4, 1024, 7), { maxBytes: 4096 });
    assert.equal(ok.size, 4096);
    assert.deepEqual(
      files().filter((f) => !before.includes(f)),
      [join("sha256", ok.digest.slice(0, 2), ok.digest)],
    );
  });

  it("a source that fails half way: its own error, nothing stored", async () => {
    const before = files();
    const boom = new AgentdError("EVALIDATION", "workspace_tar: bad entry", {
      field: "workspace_tar",
    });
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.alloc(512 * 1024, 9);
      throw boom;
    }
    await assert.rejects(store.putStream(failing()), (e: unknown) => e === boom);
    assert.deepEqual(files(), before);
  });

  it("an aborted signal stops a source that is still waiting, nothing stored", async () => {
    const before = files();
    const ac = new AbortController();
    let stopped = false;
    async function* slow(): AsyncGenerator<Uint8Array> {
      try {
        yield Buffer.alloc(1024, 3);
        await new Promise((r) => setTimeout(r, 60_000).unref());
        yield Buffer.alloc(1024, 4);
      } finally {
        stopped = true;
      }
    }
    const put = store.putStream(slow(), { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("deadline")), 50);
    await assert.rejects(put, /deadline/);
    assert.deepEqual(files(), before);
    assert.equal(stopped, false, "the stuck source was not awaited");
    await assert.rejects(store.putStream(chunks(1, 1), { signal: ac.signal }), /deadline/);
  });

  it("a storage failure is EIO without the host path (kept in the cause)", async () => {
    const broken = join(dir, "broken");
    writeFileSync(broken, "a file where the store's directory should be");
    const bad = new FsArtifactStore(broken);
    await assert.rejects(bad.putStream(chunks(1, 10)), (e: unknown) => {
      assert.ok(isAgentdError(e, "EIO"));
      assert.doesNotMatch(e.message, /\//);
      assert.match(String((e.cause as Error).message), /broken/);
      return true;
    });
  });

  it("a 256 MiB stream with a signal grows peak RSS by far less than its size", async () => {
    // Fresh 64 KiB chunks, as a decompressor makes them: a store (or its abort handling)
    // that kept a reference to each would keep all 256 MiB.
    async function* fresh(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 4096; i++) yield Buffer.alloc(64 * 1024, i & 0xff);
    }
    const rssBefore = process.memoryUsage().rss;
    const info = await store.putStream(fresh(), { signal: new AbortController().signal });
    // maxRSS is the kernel's high-water mark: no spike between samples can hide.
    const growth = process.resourceUsage().maxRSS * 1024 - rssBefore;
    assert.equal(info.size, 256 * 1024 * 1024);
    assert.ok(growth < 96 * 1024 * 1024, `peak RSS grew by ${growth} bytes`);
  });
});

describe("FsArtifactStore.sweepTemp", () => {
  it("removes temp files a killed writer left, once they are old, and nothing else", async () => {
    const root = join(tmpdir(), `agentd-sweep-${Date.now()}`);
    const s = new FsArtifactStore(root);
    const kept = await s.put(Buffer.from("a blob"));
    mkdirSync(join(root, "tmp"), { recursive: true });
    writeFileSync(join(root, "tmp", "old.tmp"), "half a blob");
    writeFileSync(join(root, "tmp", "fresh.tmp"), "being written");
    writeFileSync(join(root, "tmp", "other.txt"), "not ours");
    const hourAgo = (Date.now() - 2 * 60 * 60_000) / 1000;
    utimesSync(join(root, "tmp", "old.tmp"), hourAgo, hourAgo);
    assert.equal(await s.sweepTemp(), 1);
    assert.deepEqual(readdirSync(join(root, "tmp")).sort(), ["fresh.tmp", "other.txt"]);
    assert.deepEqual(await s.stat(kept.digest), kept);
    assert.equal(await new FsArtifactStore(join(root, "none")).sweepTemp(), 0);
    rmSync(root, { recursive: true, force: true });
  });
});

runArtifactStoreConformance("fs", {
  store: () => store,
  leftovers: async () => files().filter((f) => f.startsWith("tmp")),
});
