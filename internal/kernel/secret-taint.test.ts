/**
 * The taint bookkeeping alone (secret-containment.test.ts runs it against a real sandbox):
 * a scan's answer is trusted only whole, a failed scan taints every root, a taint ends only
 * when a scan shows the file gone or restored, and the log's last record per call wins.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EventSchema } from "../gen/agentd/v1/events_pb.js";
import { nameKey } from "./held-names.ts";
import {
  CONTAINER_STATE,
  containerState,
  describeTaint,
  GONE,
  heldFiles,
  holdsSecretUnder,
  isCleared,
  parseScan,
  SEALED_SHOWN,
  secretWrittenEvent,
  taintFromEvents,
  taintOf,
  UNKNOWN,
  unknownRoots,
  WRITABLE_ROOTS,
  writtenBetween,
} from "./secret-taint.ts";

const KEY = nameKey(Buffer.alloc(32, 7));
const H1 = "a".repeat(64);
const H2 = "b".repeat(64);

describe("parseScan", () => {
  const T = "2026-11-28 12:00:00.000000001 +0000";
  it("digests each entry from its metadata, content and link target; GNU's escaped names", () => {
    const s = parseScan(
      [
        `M 41ed 1000 1000 60 ${T} ${T}  /tmp`,
        `M a1ff 1000 1000 1 ${T} ${T}  /tmp/l`,
        "L /tmp/l",
        "x",
        `M 81a4 1000 1000 3 ${T} ${T}  /tmp/a b`,
        `${H1}  /tmp/a b`,
        `M 81a4 1000 1000 3 ${T} ${T}  /tmp/x\\y`,
        `\\${H2}  /tmp/x\\\\y`,
        "END",
        "",
      ].join("\n"),
    );
    assert.deepEqual([...(s?.keys() ?? [])], ["/tmp", "/tmp/l", "/tmp/a b", "/tmp/x\\y"]);
    assert.match(s?.get("/tmp") ?? "", /^dir:/);
    assert.match(s?.get("/tmp/l") ?? "", /^link:/);
    assert.match(s?.get("/tmp/a b") ?? "", /^file:/);
    assert.notEqual(s?.get("/tmp/a b"), s?.get("/tmp/x\\y"));
  });
  it("trusts nothing of an answer that did not end, says UNSAFE or holds a line it cannot read", () => {
    for (const out of [
      `M 81a4 1000 1000 3 ${T} ${T}  /tmp/a\n`,
      `${H1}  /tmp/a\nEND\ntrailing\n`,
      "UNSAFE\nEND\n",
      "garbage\nEND\n",
      "L /tmp/l\n",
      "M 81a4\nEND\n",
      "",
    ])
      assert.equal(parseScan(out), undefined, JSON.stringify(out));
  });
});

describe("writtenBetween and isCleared", () => {
  const before = new Map([
    ["/workspace/a", H1],
    ["/workspace", "dir"],
  ]);
  it("taints what is new or changed, nothing else", () => {
    const after = new Map([...before, ["/workspace/a", H2], ["/tmp/n", H1]]);
    assert.deepEqual(writtenBetween(before, after, "c1"), [
      { path: "/workspace/a", digest: H2, before: H1, callId: "c1" },
      { path: "/tmp/n", digest: H1, before: "", callId: "c1" },
    ]);
    assert.deepEqual(writtenBetween(before, new Map(before), "c1"), []);
  });
  it("a removed path is a write: tainted GONE until it is back exactly as before", () => {
    const after = new Map([["/workspace", "dir"]]);
    const t = writtenBetween(before, after, "c3");
    assert.deepEqual(t, [{ path: "/workspace/a", digest: GONE, before: H1, callId: "c3" }]);
    const f = t[0] as (typeof t)[number];
    assert.equal(isCleared(f, after, KEY), false, "still gone");
    assert.equal(
      isCleared(f, new Map([["/workspace/a", H2]]), KEY),
      false,
      "back, but not as before",
    );
    assert.equal(isCleared(f, new Map([["/workspace/a", H1]]), KEY), true);
  });
  it("a scan that failed, before or after, taints every root, and no scan ends that", () => {
    const t = writtenBetween(undefined, before, "c2");
    assert.deepEqual(
      t.map((f) => f.path),
      [...WRITABLE_ROOTS],
    );
    assert.deepEqual(writtenBetween(before, undefined, "c2"), unknownRoots("c2"));
    for (const f of t) assert.equal(isCleared(f, new Map(), KEY), false);
    assert.equal(t[0]?.digest, UNKNOWN);
  });
  it("a taint ends when the file is gone or back to its content from before, not when changed again", () => {
    const f = { path: "/workspace/a", digest: H2, before: H1, callId: "c" };
    assert.equal(isCleared(f, new Map(), KEY), true);
    assert.equal(isCleared(f, new Map([["/workspace/a", H1]]), KEY), true);
    assert.equal(isCleared(f, new Map([["/workspace/a", H2]]), KEY), false);
    assert.equal(isCleared(f, new Map([["/workspace/a", "c".repeat(64)]]), KEY), false);
    const created = { ...f, before: "" };
    assert.equal(isCleared(created, new Map([["/workspace/a", H1]]), KEY), false);
  });
});

describe("taintFromEvents", () => {
  const ev = (payload: ReturnType<typeof secretWrittenEvent>) => create(EventSchema, { payload });
  it("keeps each call's last record: a call cut off mid-way leaves every root tainted", () => {
    const events = [
      ev(secretWrittenEvent("c1", unknownRoots("c1"))),
      ev(
        secretWrittenEvent("c1", [{ path: "/workspace/t", digest: H1, before: "", callId: "c1" }]),
      ),
      ev(secretWrittenEvent("c2", unknownRoots("c2"))),
    ];
    const t = taintFromEvents(events);
    assert.deepEqual([...t.keys()].sort(), [
      "/cache",
      "/dev/shm",
      "/tmp",
      "/workspace",
      "/workspace/t",
    ]);
    assert.equal(taintFromEvents(events.slice(0, 2)).size, 1);
    assert.equal(taintFromEvents([]).size, 0);
  });
  it("paths under a tainted one count", () => {
    const t = taintFromEvents([
      ev(
        secretWrittenEvent("c", [{ path: "/workspace/d", digest: "dir", before: "", callId: "c" }]),
      ),
    ]);
    assert.equal(taintOf(t, "/workspace/d/e/f", KEY)?.callId, "c");
    assert.equal(taintOf(t, "/workspace/de", KEY), undefined);
    assert.equal(holdsSecretUnder(t, "/cache"), false);
    assert.equal(holdsSecretUnder(t, "/workspace"), true);
  });
});

describe("the container-state entry", () => {
  it("no scan ends it, it is no file, and a taker derives it from the log", () => {
    const c = containerState("c1");
    assert.equal(c.path, CONTAINER_STATE);
    assert.equal(isCleared(c, new Map(), KEY), false);
    assert.equal(isCleared(c, new Map([[CONTAINER_STATE, UNKNOWN]]), KEY), false);
    const taint = new Map([
      [CONTAINER_STATE, c],
      ["/workspace/t", { path: "/workspace/t", digest: H1, before: "", callId: "c1" }],
    ]);
    // The container's state held: every root is named, whether the exec left a file or not.
    assert.deepEqual(heldFiles(taint), ["/workspace/t", ...SEALED_SHOWN]);
    assert.equal(taintOf(taint, "/workspace/x", KEY), undefined);
    assert.equal(holdsSecretUnder(taint, "/cache"), false);
    assert.match(
      describeTaint(taint),
      /may hold a secret in \/workspace\/t \(call c1\), paths in \/workspace, .* and elsewhere .*; the container's kernel state/,
    );
    assert.equal(
      describeTaint(new Map([[CONTAINER_STATE, c]])).replace(/call c1/, ""),
      describeTaint(
        new Map([
          [CONTAINER_STATE, c],
          ["/workspace//k.m", { ...c, path: "/workspace//k.m" }],
        ]),
      ).replace(/call c1/, ""),
      "a run whose exec left files and one whose exec left none read alike",
    );
    const event = create(EventSchema, { payload: secretWrittenEvent("c1", [c]) });
    assert.deepEqual([...taintFromEvents([event]).keys()], [CONTAINER_STATE]);
  });
});
