/**
 * Attack on the policy file lock (file-lock.ts): many applies race to break one stale lock
 * (a crashed holder's, older than 30 s). Breaking it must let exactly one in at a time —
 * before, each racer that had judged it stale removed whatever lock was there by then, a
 * fresh holder's included, and two applies wrote the file at once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { withFileLock } from "./file-lock.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-file-lock-"));
after(() => rmSync(dir, { recursive: true, force: true }));

it("racers breaking one stale lock hold it one at a time, and every one gets it", async () => {
  for (let round = 0; round < 20; round++) {
    const path = join(dir, `policy-${round}.yaml`);
    const lock = `${path}.agentd-lock`;
    writeFileSync(lock, "99999\n");
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);
    let inside = 0;
    let most = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 8 }, () =>
        withFileLock(path, async () => {
          inside++;
          most = Math.max(most, inside);
          await new Promise((r) => setTimeout(r, 5));
          inside--;
          done++;
        }),
      ),
    );
    assert.equal(most, 1, `round ${round}: ${most} holders at once`);
    assert.equal(done, 8);
  }
});
