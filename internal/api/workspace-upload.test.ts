/**
 * The server's uploader against a real file artifact store: an inline CreateRun archive is
 * unpacked a slot per chunk (another tenant's upload takes turns in between), and the
 * slots go round-robin across tenants (one tenant's three streams do not crowd out another
 * tenant's one). The slots are the real fair slots, with each grant noted.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { tarOf } from "../testing/tar.ts";
import { createFairSlots, type FairSlots } from "./fair-slots.ts";
import { createWorkspaceUploader, DEFAULT_WORKSPACE_LIMITS } from "./workspace-upload.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-workspace-upload-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Fair slots of one permit, with the tenant of each grant in `grants`; `granted(t)` resolves
 * at the first grant to tenant `t` (in the grant's own turn, before its holder goes on).
 */
function noted(): { slots: FairSlots; grants: string[]; granted(t: string): Promise<void> } {
  const real = createFairSlots(1);
  const grants: string[] = [];
  const waiters = new Map<string, () => void>();
  return {
    grants,
    granted: (t) => new Promise<void>((resolve) => waiters.set(t, resolve)),
    slots: {
      get active() {
        return real.active;
      },
      get waiting() {
        return real.waiting;
      },
      acquire: (tenantId, signal) =>
        real.acquire(tenantId, signal).then((release) => {
          grants.push(tenantId);
          waiters.get(tenantId)?.();
          return release;
        }),
    },
  };
}

/** A tar of `mib` MiB of random text (its own digest each time). */
const archive = (mib: number) =>
  tarOf([{ name: "data.txt", data: randomBytes((mib * 1024 * 1024 * 3) / 4).toString("base64") }]);

/** `buf` in chunks of `size` bytes, as a stream would bring them. */
async function* chunked(buf: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < buf.length; at += size) yield buf.subarray(at, at + size);
}

describe("createWorkspaceUploader", () => {
  it("an inline archive takes a slot per chunk: another tenant's stream takes turns in between", async () => {
    const { slots, grants, granted } = noted();
    const uploader = createWorkspaceUploader(
      new FsArtifactStore(join(dir, "inline")),
      DEFAULT_WORKSPACE_LIMITS,
      slots,
    );
    const [inline, streamed] = await Promise.all([archive(4), archive(4)]);
    // b's stream has its first chunk in, then brings the rest once a's unpacking holds the
    // slot: b then waits for it, whatever the machine's speed, and must get a turn.
    const aStarted = granted("a");
    async function* afterAStarts(): AsyncGenerator<Uint8Array> {
      let first = true;
      for await (const c of chunked(streamed, 256 * 1024)) {
        yield c;
        if (first) await aStarted;
        first = false;
      }
    }
    const bStarted = granted("b");
    const bStream = uploader.storeStream(afterAStarts(), { tenantId: "b" });
    await bStarted;
    const [a, b] = await Promise.all([uploader.store(inline, { tenantId: "a" }), bStream]);
    assert.match(a.digest, /^[0-9a-f]{64}$/);
    assert.match(b.digest, /^[0-9a-f]{64}$/);
    const inlineGrants = grants.filter((t) => t === "a").length;
    assert.ok(inlineGrants >= 4, `the 4 MiB inline archive took ${inlineGrants} slots`);
    const first = grants.indexOf("a");
    const last = grants.lastIndexOf("a");
    assert.ok(
      grants.slice(first, last).includes("b"),
      `the other tenant had a turn while the inline archive was unpacked: ${grants.join("")}`,
    );
  });

  it("slots go round-robin across tenants: three streams of one tenant do not crowd out one of another's", async () => {
    const { slots, grants } = noted();
    const uploader = createWorkspaceUploader(
      new FsArtifactStore(join(dir, "fair")),
      { ...DEFAULT_WORKSPACE_LIMITS, maxUploadsPerTenant: 3 },
      slots,
    );
    const tars = await Promise.all([archive(2), archive(2), archive(2), archive(2)]);
    const chunk = 256 * 1024;
    const done = await Promise.all([
      ...tars.slice(0, 3).map((t) => uploader.storeStream(chunked(t, chunk), { tenantId: "a" })),
      uploader.storeStream(chunked(tars[3] as Buffer, chunk), { tenantId: "b" }),
    ]);
    assert.equal(new Set(done.map((d) => d.digest)).size, 4);
    const bGrants = grants.filter((t) => t === "b").length;
    const bLast = grants.lastIndexOf("b");
    // Round-robin: b's chunks alternate with a's, so b is done about 2×bGrants grants in;
    // first come first served would have had three of a's before each of b's (4×bGrants).
    assert.ok(
      bLast < 3 * bGrants,
      `b's last chunk came at grant ${bLast} of ${grants.length} (b had ${bGrants}): ${grants.join("")}`,
    );
  });
});
