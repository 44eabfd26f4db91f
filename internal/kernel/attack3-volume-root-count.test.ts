/**
 * ATTACK (review of issue #27 deliverable 1 after 8427a1b): held-names.ts sealRoot collapses a
 * root's records past RECORDS_PER_ROOT (16) to its top-level entries, then to the root
 * itself — except under "/" (every path outside /workspace, /tmp, /cache, /dev/shm: a run's
 * own image's VOLUMEs, which agentd mounts as tmpfs owned by the sandbox user), where "the
 * top-level entries stay, padded to the next multiple" (paddedCount). So a program writing
 * under 17 of an image's volumes leaves 32 "/" records, one writing under 16 leaves 16:
 * the record's shape is the program's choice again, against docs/policy.md ("Every root gets
 * exactly 16 records per call … the record's shape is the same for every call"). An image
 * may declare up to 32 volumes (docker-sandbox.ts MAX_IMAGE_VOLUMES).
 * Shown with one bit of the value's first byte picking 16 or 17 volumes to write a file in.
 * What must hold: every root (and "/") gets the same number of records per call, whatever
 * the program wrote (e.g. collapse "/" to one whole-"/" hold past 16, as other roots do).
 *
 * Builds a local image FROM the test image (no registry) with 17 VOLUMEs; removes it after.
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { containmentRun } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { sandboxImage } from "../testing/docker.ts";
import { anchorOf } from "./held-names.ts";

const suite = containmentSuite();
const TAG = `agentd-attack3-volumes:${process.pid}`;
const VOLUMES = Array.from({ length: 17 }, (_, i) => `/v${i}`);

before(() => {
  execFileSync("docker", ["build", "-q", "-t", TAG, "-"], {
    input: `FROM ${sandboxImage("test")}\n${VOLUMES.map((v) => `VOLUME ${v}`).join("\n")}\n`,
  });
});
after(() => {
  try {
    execFileSync("docker", ["image", "rm", TAG], { stdio: "ignore" });
  } catch {
    // already gone
  }
});

/** The approved program: bit 6 of the first byte (flipped when `flip`) picks 16 or 17 volumes. */
const program = (flip: boolean): string =>
  [
    'c=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1);',
    `b=$(( ((c >> 6) & 1) ^ ${flip ? 1 : 0} )); n=16; if [ $b -eq 1 ]; then n=17; fi;`,
    "i=0; while [ $i -lt $n ]; do : > /v$i/f; i=$((i+1)); done",
  ].join(" ");

/** Per root, how many records the approved call's last `secret.written` holds. */
async function shape(flip: boolean): Promise<string> {
  const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel, {
    image: TAG,
    userImage: true,
  });
  const w = await f.approved("process.run", { command: program(flip) });
  assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
  const written = (await suite.stack.log.read(f.run.runId, 0))
    .map((e) => e.event.payload)
    .filter((p) => p.case === "secretWritten")
    .at(-1);
  const counts = new Map<string, number>();
  for (const file of written?.case === "secretWritten" ? written.value.files : []) {
    const root = anchorOf(file.path) ?? file.path;
    counts.set(root, (counts.get(root) ?? 0) + 1);
  }
  return JSON.stringify([...counts].sort());
}

describe("attack: under '/' (an image's volumes) the record count is the program's choice", () => {
  it("one bit of the value picks 16 or 32 '/' records", async () => {
    const a = await shape(false);
    const b = await shape(true);
    assert.equal(a, b, `the log's records differ with one bit of the value: ${a} vs ${b}`);
  });
});
