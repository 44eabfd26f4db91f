/**
 * ATTACK (review of issue #27 deliverable 1, "Names are held too"): the SHAPE of a
 * secret-carrying call's `secret.written` record is secret-dependent and in clear.
 * held-names.ts keys the names a call MADE, but (a) which pre-existing paths it removed or
 * changed are recorded in clear ("the model chose them without the value" — it chose the
 * candidates, the program chose the subset WITH the value), and (b) every held name is
 * grouped under its clear ANCHOR, so the number of records per anchor (and the preview's
 * "N names held" per anchor) is a number the program picks from the value. Either way the
 * event log and the next call's preview carry the secret, decodable without the name key.
 * Each test decodes the secret from what the log and the preview hold, and asserts it
 * cannot. They failed before held-names.ts keyed every path of such a call under its root
 * (existing ones too), bound its digests to their paths and padded each root's records;
 * previews now name a root's held paths without a count.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ContainmentRun, containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { parseHeld } from "./held-names.ts";

const suite = containmentSuite();

/** The files of the last `secret.written` of `callId`, as the log holds them. */
async function recorded(
  f: ContainmentRun,
  callId: string,
): Promise<{ path: string; digest: string }[]> {
  let files: { path: string; digest: string }[] = [];
  for (const e of await suite.stack.log.read(f.run.runId, 0)) {
    const p = e.event.payload;
    if (p.case === "secretWritten" && p.value.callId === callId)
      files = p.value.files.map((x) => ({ path: x.path, digest: x.digest }));
  }
  return files;
}

/** The call id the fixture gave the last `approved` call (the last secretWritten's). */
async function lastSecretCall(f: ContainmentRun): Promise<string> {
  let id = "";
  for (const e of await suite.stack.log.read(f.run.runId, 0))
    if (e.event.payload.case === "secretWritten") id = e.event.payload.value.callId;
  return id;
}

const BITS = SECRET.length * 8;
const NIBBLES = SECRET.length * 2;

describe("attack: the secret in the shape of a secret.written record", () => {
  it("which pre-existing files a secret call removes: recorded in clear, one bit per file", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    // The repository's own files (existed before; no secret involved): b/0 … b/231.
    const made = await f.sh(
      `mkdir -p /workspace/b && i=0; while [ $i -lt ${BITS} ]; do : > /workspace/b/$i; i=$((i+1)); done`,
    );
    assert.equal(made.exitCode, 0, made.stderr);
    // A call a person approves (it uses the token): remove b/N for every 1 bit of the value.
    const w = await f.approved("process.run", {
      command: [
        'i=0; for c in $(printf %s "$ENV.DEMO_TOKEN" | od -An -v -tu1); do',
        "j=0; while [ $j -lt 8 ]; do",
        "if [ $(( (c >> (7 - j)) & 1 )) -eq 1 ]; then rm /workspace/b/$((i * 8 + j)); fi;",
        "j=$((j + 1)); done; i=$((i + 1)); done",
      ].join(" "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    const files = await recorded(f, await lastSecretCall(f));
    const gone = new Set<number>();
    for (const x of files) {
      const m = /^\/workspace\/b\/(\d+)$/.exec(x.path);
      if (m !== null) gone.add(Number(m[1]));
    }
    const fromBits = (set: Set<number>): string => {
      const bytes: number[] = [];
      for (let i = 0; i < SECRET.length; i++) {
        let b = 0;
        for (let j = 0; j < 8; j++) b = (b << 1) | (set.has(i * 8 + j) ? 1 : 0);
        bytes.push(b);
      }
      return Buffer.from(bytes).toString("latin1");
    };
    assert.notEqual(
      fromBits(gone),
      SECRET,
      "the event log's secret.written spells the secret in which clear paths it names",
    );
    // The next call's preview shows the same clear paths to whoever reads it.
    const next = await f.unapproved("process.run", { command: "true" });
    assert.equal(next.kind, "paused");
    const shown = new Set<number>();
    for (const s of next.kind === "paused" ? (next.preview.secretFiles ?? []) : []) {
      const m = /^\/workspace\/b\/(\d+)$/.exec(s);
      if (m !== null) shown.add(Number(m[1]));
    }
    assert.notEqual(fromBits(shown), SECRET, "the preview's secret_files spell the secret");
  });

  it("how many names a secret call makes per pre-existing directory: counted in clear", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    // The repository's own directories (existed before): d/0 … d/57, one per nibble.
    const made = await f.sh(
      `i=0; while [ $i -lt ${NIBBLES} ]; do mkdir -p /workspace/d/$i; i=$((i+1)); done`,
    );
    assert.equal(made.exitCode, 0, made.stderr);
    // In d/K the call makes as many files as nibble K of the value (< 1,000 names in all,
    // so no bound holds the anchors whole). The names themselves carry nothing.
    const w = await f.approved("process.run", {
      command: [
        'k=0; for c in $(printf %s "$ENV.DEMO_TOKEN" | od -An -v -tu1); do',
        "for n in $((c >> 4)) $((c & 15)); do",
        "m=0; while [ $m -lt $n ]; do : > /workspace/d/$k/x$m; m=$((m + 1)); done;",
        "k=$((k + 1)); done; done",
      ].join(" "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    const fromCounts = (count: Map<string, number>): string => {
      const bytes: number[] = [];
      for (let i = 0; i < SECRET.length; i++)
        bytes.push(
          ((count.get(`/workspace/d/${2 * i}`) ?? 0) << 4) |
            (count.get(`/workspace/d/${2 * i + 1}`) ?? 0),
        );
      return Buffer.from(bytes).toString("latin1");
    };
    // The log: records per clear anchor (no key needed).
    const perAnchor = new Map<string, number>();
    for (const x of await recorded(f, await lastSecretCall(f))) {
      const h = parseHeld(x.path);
      if (h !== undefined) perAnchor.set(h.anchor, (perAnchor.get(h.anchor) ?? 0) + 1);
    }
    assert.notEqual(
      fromCounts(perAnchor),
      SECRET,
      "the event log's secret.written spells the secret in how many held names each clear anchor has",
    );
    // The preview: `ANCHOR/… (N names held)`.
    const next = await f.unapproved("process.run", { command: "true" });
    assert.equal(next.kind, "paused");
    const shown = new Map<string, number>();
    for (const s of next.kind === "paused" ? (next.preview.secretFiles ?? []) : []) {
      const m = /^(\/workspace\/d\/\d+)\/… \((\d+) names? held\)$/.exec(s);
      if (m !== null) shown.set(m[1] as string, Number(m[2]));
    }
    assert.notEqual(fromCounts(shown), SECRET, "the preview's counts spell the secret");
  });
});
