/**
 * ATTACK (review of issue #27, secret containment): the path of a file a secret-carrying
 * call makes was recorded as it is in the log (`secret.written`) and shown in every later
 * preview. A person approves a call that makes a file in /tmp whose NAME is the secret
 * reversed (no known form of it); the event log, and the preview of the next call, carried
 * the secret in a form one `rev` turns back. Now such names are held (held-names.ts): keyed
 * in the log with the run's name key, never named or counted in previews and patch
 * omissions; the checks still find them by hashing the candidate path.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ContainmentRun,
  containmentRun,
  holds,
  holdsByName,
  SECRET,
} from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { nameKey } from "./held-names.ts";
import { SEALED_SHOWN, taintFromEvents, taintOf } from "./secret-taint.ts";

/** Far more names than a root's records (RECORDS_PER_ROOT) or a top-level entry list hold. */
const MAX_HELD_NAMES = 1000;

const suite = containmentSuite();

const reversed = [...SECRET].reverse().join("");
const base32 = (s: string): string => {
  const A = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const b of Buffer.from(s)) bits += b.toString(2).padStart(8, "0");
  let out = "";
  for (let i = 0; i < bits.length; i += 5)
    out += A[Number.parseInt(bits.slice(i, i + 5).padEnd(5, "0"), 2)];
  return out;
};
/** The forms of the secret a name could spell, as the log would hold them. */
const hex = Buffer.from(SECRET).toString("hex");
const forms = [SECRET, reversed, base32(SECRET), hex, [...SECRET].join("/")];
const logText = async (f: ContainmentRun): Promise<string> =>
  (await suite.stack.log.read(f.run.runId, 0)).map((e) => e.json).join("\n");
const assertLogFree = async (f: ContainmentRun, what: string): Promise<void> => {
  const text = await logText(f);
  for (const form of forms) assert.equal(text.includes(form), false, `${what}: log holds ${form}`);
};

describe("attack: a secret spelled by a tainted path's name", () => {
  it("the event log never holds the secret reversed after a call that names a file with it", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    const w = await f.approved("process.run", {
      command: 'touch "/tmp/$(printf %s "$ENV.DEMO_TOKEN" | rev)"',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holdsByName(f.run, `/tmp/${reversed}`), true, "the call's file is held");
    const next = await f.unapproved("process.run", { command: "ls /workspace" });
    assert.equal(
      JSON.stringify(next).includes(reversed),
      false,
      `the later call's preview spells the secret reversed: ${JSON.stringify(next).slice(0, 400)}`,
    );
    assert.equal(
      next.kind === "paused" && next.preview.secretFiles?.includes("/tmp/… (names held)"),
      true,
    );
    assert.match(
      next.kind === "paused" ? next.preview.summary : "",
      /paths in \/workspace, \/tmp, \/cache, \/dev\/shm and elsewhere \(which, where and how many: held\)/,
    );
    await assertLogFree(f, "reversed");
    // A person removes it: a scan finds its keyed name gone and ends the file's hold.
    await f.sh(`rm -f "/tmp/${reversed}"`);
    const later = await f.unapproved("process.run", { command: "true" });
    assert.deepEqual(later.kind === "paused" && later.preview.secretFiles, [...SEALED_SHOWN]);
    assert.equal(holds(f.run, `/tmp/${reversed}`), false);
  });

  it("one character per directory level, a hex name by a rename: none in the log; a taker still holds them", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    const w = await f.approved("process.run", {
      command: [
        'mkdir -p "/workspace/lv/$(printf %s "$ENV.DEMO_TOKEN" | sed "s|.|&/|g")"',
        'touch "/workspace/lv/$(printf %s "$ENV.DEMO_TOKEN" | sed "s|.|&/|g")f"',
        'mv hello.txt "$(printf %s "$ENV.DEMO_TOKEN" | od -An -tx1 | tr -d " \\n")"',
      ].join(" && "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const deep = `/workspace/lv/${[...SECRET].join("/")}/f`;
    const renamed = `/workspace/${hex}`;
    assert.equal(holdsByName(f.run, deep), true, "the deepest file");
    assert.equal(holdsByName(f.run, renamed), true, "the renamed file");
    // A name that existed before (removed by the rename) is keyed too: which existing
    // files a secret call touched is the program's choice.
    assert.equal(f.run.taint?.has("/workspace/hello.txt"), false, "a removed name is in clear");
    assert.equal(holdsByName(f.run, "/workspace/hello.txt"), true, "the removed name is held");
    await assertLogFree(f, "levels, hex, rename");
    // A taker derives the taint from the log and checks paths with the key beside it.
    const events = (await suite.stack.log.read(f.run.runId, 0)).map((e) => e.event);
    const derived = taintFromEvents(events);
    const key = nameKey(await suite.stack.log.runNameKey(f.run.runId));
    assert.equal(taintOf(derived, deep, key) !== undefined, true);
    assert.equal(taintOf(derived, renamed, key) !== undefined, true);
    assert.equal(taintOf(derived, "/workspace/other", key), undefined);
  });

  it("a name with a newline: the scan refuses it and every root is held; the log holds no form", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    const w = await f.approved("process.run", {
      command: 'touch "/tmp/x\n$(printf %s "$ENV.DEMO_TOKEN" | rev)"',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // Every root held whole, sealed like any record (a failed scan looks like any other).
    for (const root of ["/tmp", "/workspace", "/cache", "/dev/shm"])
      assert.equal(holds(f.run, `${root}/never-written`), true, root);
    await assertLogFree(f, "newline");
  });

  it(`${MAX_HELD_NAMES + 100} new names: their directory is held as a whole; the record stays small`, async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    await f.sh("mkdir -p /tmp/many");
    const w = await f.approved("process.run", {
      command: `r=$(printf %s "$ENV.DEMO_TOKEN" | rev); i=0; while [ $i -lt ${MAX_HELD_NAMES + 100} ]; do : > "/tmp/many/$r$i"; i=$((i+1)); done`,
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 300));
    assert.equal(holds(f.run, "/tmp/many/never-written"), true, "/tmp/many is held whole");
    assert.equal(holds(f.run, "/tmp/elsewhere"), false, "by its keyed name: not all of /tmp");
    assert.equal(holds(f.run, `/tmp/many/${reversed}7`), true);
    const written = (await suite.stack.log.read(f.run.runId, 0)).filter(
      (e) => e.event.payload.case === "secretWritten",
    );
    for (const e of written)
      assert.equal(e.json.length < 64 * 1024, true, `${e.json.length} bytes`);
    await assertLogFree(f, "many");
    // Still held after a person removes them (a whole directory's hold no scan ends).
    await f.sh("rm -rf /tmp/many/*");
    const later = await f.unapproved("process.run", { command: "true" });
    assert.equal(later.kind, "paused");
    assert.equal(holds(f.run, "/tmp/many/new"), true);
  });
});
