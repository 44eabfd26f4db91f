/**
 * A restored workspace keeps its file times, seen by the tools that decide by them, across
 * a real pause: a run edits files (same size), pauses for an approval (its container is
 * removed, its workspace kept as a snapshot), resumes in a new container from that snapshot
 * and builds and tests again. Python must not run its stale bytecode, make must rebuild a
 * target built in the same second as its source's later edit, node must see the new content
 * and the times jest-haste-map compares must be the ones before the pause. Real parts: the
 * embedded event log, the base image (python3, make, node 24) in real containers, the
 * kernel, the AI SDK against a scripted model. Go: restore-times-go.test.ts. jest itself
 * is not run: it needs node_modules from the registry, which the sandbox cannot reach.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sandboxImage } from "../testing/docker.ts";
import {
  edit,
  file,
  type PauseRestore,
  sh,
  startPauseRestore,
  stdoutOf,
} from "../testing/pause-restore.ts";

let harness: PauseRestore;
before(async () => {
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

const STAT = "stat -c '%n %.9Y' mod.py src.txt out.txt js js/data.txt";

describe("a workspace restored after a pause keeps its file times (base image)", () => {
  it("python runs the edited module, make rebuilds, node sees the new content and the old times", async () => {
    const results = await harness.run({
      image: sandboxImage("base"),
      files: [
        file("mod.py", 'VALUE = "old"\n'),
        file("src.txt", "old\n"),
        file("Makefile", "out.txt: src.txt\n\tcp src.txt out.txt\n"),
        file("js/data.txt", "old\n"),
        file(
          "js/data.test.mjs",
          'import assert from "node:assert/strict";\nimport { readFileSync } from "node:fs";\nimport { test } from "node:test";\n\ntest("data", () => assert.equal(readFileSync("data.txt", "utf8"), "new\\n"));\n',
        ),
      ],
      before: [
        // The upload's files have mtime 0: the bytecode records 0 as its source's time.
        sh("build", "python3 -c 'import mod; print(mod.VALUE)' && make && ls __pycache__"),
        // Same-size edits: only the time tells them from the originals.
        edit("edit-py", "mod.py", '"old"', '"new"'),
        edit("edit-src", "src.txt", "old", "new"),
        edit("edit-data", "js/data.txt", "old", "new"),
        // A target built in the same second as its source's later edit (0.5 s apart).
        sh(
          "same-second",
          `touch -d @1700000000.2 out.txt && touch -d @1700000000.7 src.txt && { make -q; echo "make -q: $?"; } && ${STAT}`,
        ),
      ],
      after: [
        sh("times", STAT),
        sh("python", "python3 -c 'import mod; print(mod.VALUE)'"),
        sh("make", "make && cat out.txt"),
        sh("node", "cd js && node --test"),
      ],
    });
    const built = stdoutOf(results, "build");
    assert.match(built, /^old$/m);
    assert.match(built, /cp src\.txt out\.txt/);
    assert.match(built, /mod\.cpython-\d+\.pyc/, "python wrote bytecode before the edit");
    for (const id of ["edit-py", "edit-src", "edit-data"]) assert.ok(results.get(id)?.ok, id);
    const [makeQ, ...timesBefore] = stdoutOf(results, "same-second").trim().split("\n");
    assert.equal(makeQ, "make -q: 1", "before the pause make sees the target out of date");
    assert.deepEqual(timesBefore.slice(1, 3), [
      "src.txt 1700000000.700000000",
      "out.txt 1700000000.200000000",
    ]);

    assert.deepEqual(
      stdoutOf(results, "times").trim().split("\n"),
      timesBefore,
      "every time is restored to the nanosecond (jest-haste-map and make compare these)",
    );
    assert.equal(
      stdoutOf(results, "python").trim(),
      "new",
      "python recompiled the edited module instead of running its stale bytecode",
    );
    const made = stdoutOf(results, "make");
    assert.match(made, /cp src\.txt out\.txt/, "make rebuilt the target after the restore");
    assert.match(made, /^new$/m);
    assert.match(stdoutOf(results, "node"), /\bpass 1\n/, "node --test passed on the new content");
  });
});
