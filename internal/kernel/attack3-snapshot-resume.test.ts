/**
 * ATTACK (third review of issue #27 deliverable 1, after a64e740): a run that holds a
 * secret pauses at its next call that asks a person (every exec asks: the container is
 * held), and a paused run's workspace goes to a snapshot with the held paths LEFT OUT
 * (worker/workspace-snapshot.ts, kernel/secret-snapshot.ts). When the person answers that
 * call — approve or deny an innocuous `ls` — the run resumes in a new container restored
 * from the snapshot: every held file is simply absent, and the next scan ends its hold
 * (secret-taint.ts isCleared: "gone"). From then on repo.search runs with no person, and
 * which of the repository's files are missing is which files the secret-carrying call
 * touched. Set-up: the repository has b/0 … b/231; the approved call `touch`es b/N for
 * every 1 bit of the value (no content written). After the pause and resume the model's
 * repo.search lists exactly the 0 bits: the whole secret in the model's context, through
 * calls nobody approved. (docs/policy.md calls "which files a call touched" a residual of
 * the patch and snapshot "the log, previews and approvals do not tell" — the model is told.)
 * What must hold: a path held when the run paused stays held after a resume from the
 * snapshot (its absence is the secret-carrying call's doing), or repo.* ask a person.
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { sandboxImage, TEST_LIMITS } from "../testing/docker.ts";
import { snapshotWorkspace } from "../worker/workspace-snapshot.ts";
import { keepHeldAfterRestore } from "./held-after-restore.ts";
import { createRunSecrets } from "./run-secrets.ts";

const suite = containmentSuite();

const BITS = SECRET.length * 8;

describe("attack: a resume from the pause snapshot ends the holds of the files it left out", () => {
  it("which repository files are missing after the resume spells the secret to an unapproved search", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel, {
      image: sandboxImage("base"),
    });
    const made = await f.sh(
      `i=0; while [ $i -lt ${BITS} ]; do mkdir -p /workspace/b/$i && echo hit > /workspace/b/$i/f; i=$((i+1)); done`,
    );
    assert.equal(made.exitCode, 0, made.stderr);
    const w = await f.approved("process.run", {
      command: [
        'i=0; for c in $(printf %s "$ENV.DEMO_TOKEN" | od -An -v -tu1); do',
        "j=0; while [ $j -lt 8 ]; do",
        "if [ $(( (c >> (7 - j)) & 1 )) -eq 1 ]; then touch /workspace/b/$((i * 8 + j))/f; fi;",
        "j=$((j + 1)); done; i=$((i + 1)); done",
      ].join(" "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    // The model's next call asks a person (the container is held): the run pauses, and its
    // workspace goes to a snapshot (drive-hold.ts), as the drive does it.
    const asks = await f.unapproved("process.run", { command: "ls" });
    assert.equal(asks.kind, "paused");
    const dir = mkdtempSync(join(tmpdir(), "agentd-attack3-snap-"));
    let restored: Awaited<ReturnType<typeof suite.sandbox.create>> | undefined;
    try {
      const store = new FsArtifactStore(dir);
      const info = await snapshotWorkspace(
        store,
        f.box,
        createRunSecrets([SECRET]),
        f.run.taint ?? new Map(),
        f.run.nameKey,
      );
      const chunks: Buffer[] = [];
      for await (const c of store.read(info.digest)) chunks.push(Buffer.from(c));
      await f.box.destroy(); // a paused run holds no container
      // The person answers; the run resumes in a new container from the snapshot
      // (drive-start.ts: the last snapshot streams into it), its taint from the log.
      restored = await suite.sandbox.create({
        runId: f.run.runId,
        tenantId: "acme",
        image: sandboxImage("base"),
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: new Uint8Array(Buffer.concat(chunks)),
      });
      f.run.sandbox = restored;
      // As the drive starting in a fresh container does (drive-start.ts).
      await keepHeldAfterRestore(f.run.taint, (payload) =>
        suite.stack.log.append({ runId: f.run.runId, sessionId: f.run.sessionId, payload }),
      );
      const found = new Set<number>();
      for (const globs of [["b/[0-9]/**", "b/[0-9][0-9]/**"], ["b/[1-2][0-9][0-9]/**"]]) {
        const r = await f.unapproved("repo.search", { query: "^hit$", globs });
        if (r.kind !== "result") continue; // a person is asked: the defence
        assert.equal(r.ok, true, JSON.stringify(r).slice(0, 600));
        const matches = r.ok ? (r.output as { matches: { path: string }[] }).matches : [];
        for (const m of matches) {
          const d = /^b\/(\d+)\/f$/.exec(m.path);
          if (d !== null) found.add(Number(d[1]));
        }
      }
      const bytes: number[] = [];
      for (let i = 0; i < SECRET.length; i++) {
        let b = 0;
        for (let j = 0; j < 8; j++) b = (b << 1) | (found.has(i * 8 + j) ? 0 : 1);
        bytes.push(b);
      }
      assert.notEqual(
        Buffer.from(bytes).toString("latin1"),
        SECRET,
        "after a resume from the snapshot an unapproved repo.search spells the secret (the files the snapshot left out)",
      );
    } finally {
      await restored?.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
