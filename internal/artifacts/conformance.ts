/**
 * What every ArtifactStore must do, run against each adapter (the filesystem store and the
 * Redis store): content under its sha256, the same content once, nothing visible before it
 * is complete, nothing left when a write is refused (limit, source error, abort), reads in
 * the chunk size asked for, ENOTFOUND for an unknown digest.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { AgentdError, isAgentdError } from "../errors.ts";
import type { ArtifactStore } from "./port.ts";

export interface ArtifactStoreHarness {
  store(): ArtifactStore;
  /** Things the adapter keeps that are not blobs (temp files, temp keys): none after a refusal. */
  leftovers(): Promise<string[]>;
}

const sha256 = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");

async function* chunks(n: number, size: number, fill = 1): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < n; i++) yield Buffer.alloc(size, (fill + i) & 0xff);
}

async function readAll(s: ArtifactStore, digest: string, chunkSize?: number): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const c of s.read(digest, chunkSize)) out.push(Buffer.from(c));
  return out;
}

export function runArtifactStoreConformance(name: string, h: ArtifactStoreHarness): void {
  describe(`ArtifactStore conformance: ${name}`, () => {
    it("delete removes a blob (true), then finds none (false); other blobs stay; a bad digest is refused", async () => {
      const s = h.store();
      assert.ok(s.delete !== undefined, "the store can delete");
      const a = await s.put(Buffer.from(`delete me ${Math.random()}`));
      const b = await s.put(Buffer.from(`keep me ${Math.random()}`));
      assert.equal(await s.delete(a.digest), true);
      assert.equal(await s.stat(a.digest), undefined);
      assert.equal(await s.delete(a.digest), false);
      assert.deepEqual(await s.stat(b.digest), b);
      await assert.rejects(
        s.delete("../../etc/passwd"),
        (e: unknown) => isAgentdError(e) && e.code === "EVALIDATION",
      );
    });

    it("stores under the sha256; reads back whole, in the chunk size asked for", async () => {
      const s = h.store();
      const whole = Buffer.concat([
        Buffer.from("a"),
        Buffer.alloc(2.5 * 1024 * 1024, 7),
        Buffer.from("z"),
      ]);
      const info = await s.putStream(chunks(1, 0), {}); // empty blob
      assert.deepEqual(info, { digest: sha256(Buffer.alloc(0)), size: 0 });
      assert.deepEqual(await readAll(s, info.digest), []);
      const big = await s.putStream(
        (async function* () {
          yield whole.subarray(0, 1);
          yield whole.subarray(1, 1_500_000);
          yield whole.subarray(1_500_000);
        })(),
      );
      assert.deepEqual(big, { digest: sha256(whole), size: whole.byteLength });
      assert.deepEqual(await s.stat(big.digest), big);
      const parts = await readAll(s, big.digest, 100_000);
      assert.ok(parts.every((p) => p.byteLength <= 100_000));
      assert.ok(Buffer.concat(parts).equals(whole));
    });

    it("the same content twice is one blob; put() agrees with putStream()", async () => {
      const s = h.store();
      const a = await s.putStream(chunks(3, 1000, 40));
      const b = await s.put(
        Buffer.concat([Buffer.alloc(1000, 40), Buffer.alloc(1000, 41), Buffer.alloc(1000, 42)]),
      );
      assert.deepEqual(a, b);
      assert.deepEqual(await h.leftovers(), []);
    });

    it("refused writes leave nothing: over maxBytes, a failing source, an abort", async () => {
      const s = h.store();
      await assert.rejects(
        s.putStream(chunks(10, 1024), { maxBytes: 4096 }),
        (e: unknown) => isAgentdError(e, "ETOOLARGE") && /4096 bytes/.test((e as Error).message),
      );
      const boom = new AgentdError("EVALIDATION", "bad entry", { field: "workspace_tar" });
      await assert.rejects(
        s.putStream(
          (async function* () {
            yield Buffer.alloc(1024 * 1024 + 5, 9);
            throw boom;
          })(),
        ),
        (e: unknown) => e === boom,
      );
      const ac = new AbortController();
      const slow = (async function* () {
        yield Buffer.alloc(1024, 3);
        await new Promise((r) => setTimeout(r, 60_000).unref());
      })();
      const put = s.putStream(slow, { signal: ac.signal });
      setTimeout(() => ac.abort(new Error("deadline")), 50);
      await assert.rejects(put, /deadline/);
      assert.deepEqual(await h.leftovers(), []);
      const ok = await s.putStream(chunks(4, 1024, 77), { maxBytes: 4096 });
      assert.equal(ok.size, 4096, "exactly at the limit is fine");
    });

    it("an unknown digest: stat undefined, read ENOTFOUND", async () => {
      const s = h.store();
      const none = "0".repeat(64);
      assert.equal(await s.stat(none), undefined);
      await assert.rejects(readAll(s, none), (e: unknown) => isAgentdError(e, "ENOTFOUND"));
    });
  });
}
